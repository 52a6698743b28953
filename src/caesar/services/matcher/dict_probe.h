/* A dict lookup split into stages whose cache misses can be prefetched
 * (engine.pyx, CythonEngine._prefetch).
 *
 * PyDict_GetItem on a big int-keyed dict is a chain of dependent misses:
 * the index slot, the entry, the stored key (compared by value: the event's
 * key is a new int), the value. Looked up one after another for a chunk of
 * events they wait one after another; split into stages, each stage's
 * misses for the whole chunk overlap (group prefetching, Chen et al.,
 * "Improving Hash Join Performance through Prefetching", ICDE 2004).
 *
 * Only the first probe of the index is followed: a key found further on
 * (a collision) is simply not prefetched. The result is a hint: the engine
 * still looks every key up with the dict's own code.
 *
 * The layout of a dict's keys is CPython's internal one (Include/internal/
 * pycore_dict.h), copied for 3.11 only: on another version
 * CAESAR_DICT_PROBE is 0 and the engine looks the keys up whole. */
#ifndef CAESAR_DICT_PROBE_H
#define CAESAR_DICT_PROBE_H

#include <Python.h>
#include <stdint.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define CAESAR_DICT_PROBE 1

typedef struct {  /* PyDictKeyEntry */
    Py_hash_t me_hash;
    PyObject *me_key;
    PyObject *me_value;
} caesar_dict_entry;

typedef struct {  /* struct _dictkeysobject */
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size;
    uint8_t dk_log2_index_bytes;
    uint8_t dk_kind;  /* 0: DICT_KEYS_GENERAL */
    uint32_t dk_version;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;
    char dk_indices[];
} caesar_dict_keys;

#else
#define CAESAR_DICT_PROBE 0
typedef struct { Py_hash_t me_hash; PyObject *me_key; PyObject *me_value; } caesar_dict_entry;
typedef struct { char dk_indices[1]; } caesar_dict_keys;
#endif

typedef struct {
    const caesar_dict_keys *keys;
    const char *slot;               /* the index slot of the first probe */
    const caesar_dict_entry *entry; /* the entry it names */
    Py_hash_t hash;
} caesar_probe;

/* Stage 1: the first index slot of `hash` in dict `d` prefetched. 0 when
 * the dict is not a combined table of general keys (nothing to follow). */
static inline int caesar_probe_begin(caesar_probe *p, PyObject *d, Py_hash_t hash) {
#if CAESAR_DICT_PROBE
    PyDictObject *mp = (PyDictObject *) d;
    const caesar_dict_keys *k = (const caesar_dict_keys *) mp->ma_keys;
    size_t i;
    if (mp->ma_values != NULL || k->dk_kind != 0)
        return 0;
    i = (size_t) hash & (((size_t) 1 << k->dk_log2_size) - 1);
    p->keys = k;
    p->slot = k->dk_indices + (i << (k->dk_log2_index_bytes - k->dk_log2_size));
    p->entry = NULL;
    p->hash = hash;
    __builtin_prefetch(p->slot);
    return 1;
#else
    (void) p; (void) d; (void) hash;
    return 0;
#endif
}

/* Stage 2: the entry the slot names prefetched. 0 when the slot is empty
 * or a deleted entry's (the key is absent, or further on). */
static inline int caesar_probe_entry(caesar_probe *p) {
#if CAESAR_DICT_PROBE
    const caesar_dict_keys *k = p->keys;
    Py_ssize_t ix;
    switch (k->dk_log2_index_bytes - k->dk_log2_size) {
        case 0: ix = *(const int8_t *) p->slot; break;
        case 1: ix = *(const int16_t *) p->slot; break;
        case 2: ix = *(const int32_t *) p->slot; break;
        default: ix = (Py_ssize_t) *(const int64_t *) p->slot; break;
    }
    if (ix < 0)
        return 0;
    p->entry = (const caesar_dict_entry *)
        (k->dk_indices + ((size_t) 1 << k->dk_log2_index_bytes)) + ix;
    __builtin_prefetch(p->entry);
    return 1;
#else
    (void) p;
    return 0;
#endif
}

/* Stage 3: the entry's value when its hash is the key's (for the int keys
 * this is used for, a hash is the int itself), its key and value
 * prefetched; NULL otherwise. Borrowed. */
static inline PyObject *caesar_probe_value(const caesar_probe *p) {
    const caesar_dict_entry *e = p->entry;
    if (e == NULL || e->me_hash != p->hash || e->me_value == NULL)
        return NULL;
    __builtin_prefetch(e->me_key);
    __builtin_prefetch(e->me_value);
    return e->me_value;
}

#endif
