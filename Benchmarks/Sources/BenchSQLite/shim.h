// The system libsqlite3, for the benchmark's C-API floor.
#include <sqlite3.h>
