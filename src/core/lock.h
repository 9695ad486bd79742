/*
 * lock.h - a mutex for the library's few shared objects (a model's step
 * lock): pthreads natively; in the browser build, where the page calls in
 * from one thread and pthread.h is not available, an atomic flag.
 */
#ifndef WGML_CORE_LOCK_H
#define WGML_CORE_LOCK_H

#if defined(__wasm__)
#include <stdatomic.h>

typedef struct wgml_mutex {
    atomic_flag held;
} wgml_mutex;

static inline void wgml_mutex_init(wgml_mutex *m) { atomic_flag_clear(&m->held); }
static inline void wgml_mutex_destroy(wgml_mutex *m) { (void)m; }
static inline void wgml_mutex_lock(wgml_mutex *m) {
    while (atomic_flag_test_and_set_explicit(&m->held, memory_order_acquire)) {
    }
}
static inline void wgml_mutex_unlock(wgml_mutex *m) { atomic_flag_clear_explicit(&m->held, memory_order_release); }
#else
#include <pthread.h>

typedef struct wgml_mutex {
    pthread_mutex_t mu;
} wgml_mutex;

static inline void wgml_mutex_init(wgml_mutex *m) { pthread_mutex_init(&m->mu, NULL); }
static inline void wgml_mutex_destroy(wgml_mutex *m) { pthread_mutex_destroy(&m->mu); }
static inline void wgml_mutex_lock(wgml_mutex *m) { pthread_mutex_lock(&m->mu); }
static inline void wgml_mutex_unlock(wgml_mutex *m) { pthread_mutex_unlock(&m->mu); }
#endif

#endif
