// The system libsqlite3, for the Ripple store. The module is named RippleSQLite (not CSQLite) so
// that it never collides with another package's SQLite module.
#include <sqlite3.h>
