// The system libsqlite3, for the Ripple store. The module is named RippleSQLite (not CSQLite) so
// that it never collides with another package's SQLite module.
//
// Debian's and Apple's libsqlite3 are built with the pre-update hook, which the change log uses;
// the define makes its declarations visible.
#ifndef SQLITE_ENABLE_PREUPDATE_HOOK
#define SQLITE_ENABLE_PREUPDATE_HOOK 1
#endif
#include <sqlite3.h>

// sqlite3_db_config is variadic, which Swift cannot call: one form per argument list used.
static inline int ripple_db_config_flag(sqlite3 *db, int option, int enabled) {
    return sqlite3_db_config(db, option, enabled, (int *)0);
}

// The wal-index (the `-shm` file, shared by every connection to a WAL database) begins with a
// 48-byte header that SQLite rewrites on every commit (and on every reset of the WAL), in two
// copies: the second first, then the first. Ripple compares it with the header it saw after its
// own commits, to tell a wake of its file watch caused by its own commit from another
// connection's, without taking a lock. See https://sqlite.org/walformat.html ("The WAL-Index
// Header").

// The connection's mapping of the wal-index's first region, or NULL (not in WAL mode, not mapped
// yet, a VFS without shared memory). Call it where the connection may be used (it asks the VFS,
// which maps nothing new: bExtend is 0); the mapping stays valid while the connection is open in
// WAL mode. No file descriptor is opened or closed (closing one would drop the process's POSIX
// locks on the file).
static inline const volatile void *ripple_wal_index(sqlite3 *db) {
    sqlite3_file *file = 0;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || !file || !file->pMethods) return 0;
    if (file->pMethods->iVersion < 2 || !file->pMethods->xShmMap) return 0;
    volatile void *region = 0;
    if (file->pMethods->xShmMap(file, 0, 32768, 0, &region) != SQLITE_OK) return 0;
    return region;
}

// Copies the wal-index header from a mapping given by ripple_wal_index into out (48 bytes), as
// SQLite's readers do: the first copy, a barrier, the second; returns 1 when the copies agree (a
// commit was not rewriting them) and the header is initialized, else 0.
static inline int ripple_wal_index_header(const volatile void *index, unsigned char *out) {
    const volatile unsigned char *bytes = (const volatile unsigned char *)index;
    unsigned char second[48];
    for (int i = 0; i < 48; i++) out[i] = bytes[i];
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (int i = 0; i < 48; i++) second[i] = bytes[48 + i];
    for (int i = 0; i < 48; i++) if (out[i] != second[i]) return 0;
    return out[12] != 0;   // isInit
}
