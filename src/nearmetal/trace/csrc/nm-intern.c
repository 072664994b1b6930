/* nm-trace ids: string interning (file paths, variable names -> small ids, each written once
 * as a string record) and the small handle -> file id maps of the layers (MPI_File, ncid, hid).
 */
#include "nm-trace.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NM_INTERN_SLOTS 16384

static struct { uint32_t id, hash, kind; const char *text; } interned[NM_INTERN_SLOTS];
static uint32_t interned_count;
static volatile int intern_lock;

static char *arena;
static size_t arena_left;

uint32_t nm_intern(int kind, const char *s)
{
    if (!s || !*s) return 0;
    uint32_t h = 2166136261u ^ (uint32_t)kind;
    for (const char *p = s; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    size_t len = strlen(s);
    uint32_t id = 0, fresh = 0;
    nm_lock(&intern_lock);
    for (uint32_t k = h % NM_INTERN_SLOTS;; k = (k + 1) % NM_INTERN_SLOTS) {
        if (interned[k].id && interned[k].hash == h && interned[k].kind == (uint32_t)kind
            && strcmp(interned[k].text, s) == 0) { id = interned[k].id; break; }
        if (interned[k].id) continue;
        if (interned_count >= NM_INTERN_SLOTS * 3 / 4) break; /* full: the event says "no file" */
        if (arena_left < len + 1) {
            size_t size = len + 1 > (1 << 20) ? len + 1 : (1 << 20);
            void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) break;
            arena = p;
            arena_left = size;
        }
        memcpy(arena, s, len + 1);
        interned[k].text = arena;
        arena += len + 1;
        arena_left -= len + 1;
        interned[k].hash = h;
        interned[k].kind = (uint32_t)kind;
        interned[k].id = id = fresh = ++interned_count;
        break;
    }
    nm_unlock(&intern_lock); /* before emitting: a flush that creates the file takes intern_lock */
    if (fresh) nm_emit_string(kind, id, s);
    return id;
}

uint32_t nm_intern_path(const char *path)
{
    if (!path) return 0;
    const char *colon = strchr(path, ':'), *slash = strchr(path, '/');
    if (colon && colon - path >= 2 && (!slash || colon < slash)) path = colon + 1; /* ROMIO's "ufs:/x" */
    char full[PATH_MAX], cwd[PATH_MAX];
    if (realpath(path, full)) return nm_intern(NM_STR_FILE, full);
    size_t a, b = strlen(path);
    if (path[0] != '/' && getcwd(cwd, sizeof cwd) && (a = strlen(cwd)) + b + 2 <= sizeof full) {
        memcpy(full, cwd, a);
        full[a] = '/';
        memcpy(full + a + 1, path, b + 1);
        return nm_intern(NM_STR_FILE, full);
    }
    return nm_intern(NM_STR_FILE, path);
}

/* ------------------------------------------------------------------ maps */

void nm_map_put(nm_map *m, int64_t key, uint32_t value)
{
    nm_lock(&m->lock);
    int i = 0;
    while (i < m->n && m->slot[i].key != key) i++;
    if (i < (int)(sizeof m->slot / sizeof m->slot[0])) {
        if (i == m->n) m->n++;
        m->slot[i].key = key;
        m->slot[i].value = value;
    }
    __atomic_add_fetch(&m->generation, 1, __ATOMIC_RELEASE);
    nm_unlock(&m->lock);
}

/* A data call asks for the same handle again and again: each thread remembers its last
 * answer per map until a put or del changes the map (saves the lock on the hot path). */
#define NM_CACHED_MAPS 8 /* more than the layers have maps: each map keeps its own entry */
static __thread struct { nm_map *map; int64_t key; uint32_t value, generation; } recent[NM_CACHED_MAPS]
    __attribute__((tls_model("initial-exec")));
static uint32_t cached_maps;

uint32_t nm_map_get(nm_map *m, int64_t key)
{
    uint32_t slot = __atomic_load_n(&m->cache_slot, __ATOMIC_RELAXED);
    if (!slot) { /* first lookup in this map: take the next entry (a race only wastes one) */
        uint32_t mine = __atomic_add_fetch(&cached_maps, 1, __ATOMIC_RELAXED);
        uint32_t none = 0;
        __atomic_compare_exchange_n(&m->cache_slot, &none, mine, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        slot = __atomic_load_n(&m->cache_slot, __ATOMIC_RELAXED);
    }
    unsigned k = (slot - 1) % NM_CACHED_MAPS;
    uint32_t generation = __atomic_load_n(&m->generation, __ATOMIC_ACQUIRE), v = 0;
    if (recent[k].map == m && recent[k].key == key && recent[k].generation == generation) return recent[k].value;
    nm_lock(&m->lock);
    generation = m->generation;
    for (int i = 0; i < m->n; i++)
        if (m->slot[i].key == key) { v = m->slot[i].value; break; }
    nm_unlock(&m->lock);
    recent[k].map = m;
    recent[k].key = key;
    recent[k].value = v;
    recent[k].generation = generation;
    return v;
}

void nm_map_del(nm_map *m, int64_t key)
{
    nm_lock(&m->lock);
    for (int i = 0; i < m->n; i++)
        if (m->slot[i].key == key) { m->slot[i] = m->slot[--m->n]; break; }
    __atomic_add_fetch(&m->generation, 1, __ATOMIC_RELEASE);
    nm_unlock(&m->lock);
}


/* Every string interned so far, for a new trace file (its creator holds the file lock). */
void nm_intern_each(void (*fn)(int kind, uint32_t id, const char *text))
{
    nm_lock(&intern_lock);
    for (int k = 0; k < NM_INTERN_SLOTS; k++)
        if (interned[k].id) fn((int)interned[k].kind, interned[k].id, interned[k].text);
    nm_unlock(&intern_lock);
}

void nm_intern_after_fork(void) { intern_lock = 0; }

int nm_id_call(int (*real)(int), int layer, int index, int id, nm_map *files, uint32_t (*file_of)(int), int forget)
{
    nm_call c;
    if (!nm_begin(&c, layer, index)) {
        int rc = real(id);
        if (forget && rc == 0) nm_map_del(files, id);
        return rc;
    }
    int rc = real(id);
    nm_stop(&c);
    uint32_t file = file_of(id);
    if (forget && rc == 0) nm_map_del(files, id); /* after the lookup: the library reuses ids */
    nm_end(&c, file, 0, -1, -1, rc, rc != 0);
    return rc;
}
