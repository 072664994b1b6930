"""A program built for a lower SIMD level than the baseline's build or the CPU offers (seed
001). Evidence: the widest vector instructions in each variant's program file (explain/simd.py:
its .text disassembled) against the CPU's flags. Ablation: the variant with the image whose
build is the widest (among the study's variants' images and the images in nearmetal's store); otherwise the fix
is advice: build the program for this CPU (-march=native, or the application's own SIMD option)."""

from . import EXPLAINERS
from .. import simd
from .base import Explainer


@EXPLAINERS.register
class Simd(Explainer):
    title = "a program built for a lower SIMD level"
    needs_process = True  # objdump: `nearmetal explain` fills Evidence.simd before explainers run

    def examine(self, slow, base):
        mine, theirs = getattr(slow, "simd", None), getattr(base, "simd", None)
        if not mine or not theirs:
            return []
        rank = simd.LEVELS.index
        if rank(mine["level"]) >= rank(theirs["level"]):
            return []
        cpu = mine.get("cpu")
        fact = (f"the program's widest vector instructions are {simd.words(mine['level'])}; the baseline's build "
                f"uses {simd.words(theirs['level'])}" + (f" (the CPU offers {simd.words(cpu)})" if cpu else ""))
        ablation = None
        better = mine.get("wider_image")
        if better:
            ablation = {**slow.variant, "image": better}
        fix = "build the program for this CPU (-march=native, or the application's SIMD option)"
        if better:
            fact += f"; the image {better} holds a wider build of it"
            fix = f"use the image {better}, or {fix}"
        return [self.cause(fact, 0.7, factor="native-build", ablation=ablation, fix=fix)]
