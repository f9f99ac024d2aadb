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
