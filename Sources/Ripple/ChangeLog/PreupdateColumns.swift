import Foundation
import RippleSQLite

/// How SQLite's pre-update hook numbers a table's columns, learnt once per process from the
/// SQLite library itself rather than assumed.
///
/// `sqlite3_preupdate_old` and `sqlite3_preupdate_new` take a column number, but which number
/// means which column is not the same everywhere: some builds count the columns of the row's
/// record (stored columns only, a `VIRTUAL` generated column skipped) where others count the
/// table's columns, and the choice has differed between the old and new values of one update of
/// a `WITHOUT ROWID` table. And a row written before an `ALTER TABLE … ADD COLUMN` has a shorter
/// record: some builds then report NULL for the added column instead of its default.
///
/// ``learnt`` runs each kind of change once on a private in-memory database with a generated
/// column and an added column, and records what the library did; the capture maps columns with it.
struct PreupdateColumns: Sendable {
    /// How one kind of value is numbered: by position in the table, or in the stored record.
    enum Numbering: Sendable {
        case table
        case storage
    }

    /// Per kind of table (rowid, `WITHOUT ROWID`): the numbering of an insert's new values, an
    /// update's old and new values, and a delete's old values.
    struct Table: Sendable {
        var insertNew: Numbering
        var updateOld: Numbering
        var updateNew: Numbering
        var deleteOld: Numbering
    }

    var rowid: Table
    var withoutRowid: Table
    /// Whether the old value of a column added after the row was written comes back as NULL
    /// rather than the column's default (the capture then supplies the default).
    var addedColumnReadsNull: Bool
    /// The value SQLite hands out for such a column, told apart by its address from a NULL the
    /// row holds (`nil` when ``addedColumnReadsNull`` is false). Only compared, never read
    /// through: SQLite's constant, the same for every connection (hence `nonisolated(unsafe)`).
    nonisolated(unsafe) var missingValue: OpaquePointer?
    /// Whether, in a rowid table whose INTEGER PRIMARY KEY comes after a `VIRTUAL` generated
    /// column, the hook hands out the rowid in place of another column's old value (it looks
    /// for the key by its position in the table while numbering by storage): the old row cannot
    /// be read whole then.
    var misreadsRowidAfterVirtualColumn = false

    /// What this process's SQLite library does.
    static let learnt: PreupdateColumns = learn()

    /// The numbering of `operation`'s old or new values for a table of this kind.
    func numbering(withoutRowid: Bool, operation: Int32, new: Bool) -> Numbering {
        let table = withoutRowid ? self.withoutRowid : rowid
        switch operation {
        case SQLITE_INSERT: return table.insertNew
        case SQLITE_DELETE: return table.deleteOld
        default: return new ? table.updateNew : table.updateOld
        }
    }

    private final class Probe {
        /// Per table and event: the text of value 1 (`"stored"` when the numbering skipped the
        /// generated column).
        var seen: [String: String] = [:]
        var added: (isNull: Bool, pointer: OpaquePointer?) = (false, nil)
    }

    private static func learn() -> PreupdateColumns {
        // What SQLite documents: the table's numbering, defaults for added columns.
        let documented = Table(insertNew: .table, updateOld: .table, updateNew: .table, deleteOld: .table)
        var result = PreupdateColumns(rowid: documented, withoutRowid: documented, addedColumnReadsNull: false)
        // Two connections open at once: a value both hand out at one address is SQLite's own
        // constant, never a row's (which lives in its connection's memory).
        guard let first = Connection(), let second = Connection(), let probe = first.run(), let other = second.run() else {
            return result
        }
        func numbering(_ table: String, _ event: String) -> Numbering {
            probe.seen[table + " " + event] == "stored" ? .storage : .table
        }
        for (table, name) in [(\PreupdateColumns.rowid, "r"), (\PreupdateColumns.withoutRowid, "w")] {
            result[keyPath: table] = Table(insertNew: numbering(name, "insert new"), updateOld: numbering(name, "update old"),
                                           updateNew: numbering(name, "update new"), deleteOld: numbering(name, "delete old"))
        }
        result.misreadsRowidAfterVirtualColumn = probe.seen["k delete old"] != "stored"
        if probe.added.isNull, other.added.isNull, let pointer = probe.added.pointer, pointer == other.added.pointer {
            result.addedColumnReadsNull = true
            result.missingValue = pointer
        }
        return result
    }

    /// A private in-memory database that makes each kind of change once under the hook.
    private final class Connection {
        let handle: OpaquePointer

        init?() {
            var handle: OpaquePointer?
            guard sqlite3_open_v2(":memory:", &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK,
                  let handle else {
                sqlite3_close_v2(handle)
                return nil
            }
            self.handle = handle
        }

        deinit { sqlite3_close_v2(handle) }

        /// Runs the changes; `nil` when SQLite refused them.
        func run() -> Probe? {
            let probe = Probe()
            sqlite3_preupdate_hook(handle, { context, connection, operation, _, table, _, _ in
                guard let context, let connection, let table else { return }
                let probe = Unmanaged<Probe>.fromOpaque(context).takeUnretainedValue()
                let name = String(cString: table)
                func text(_ column: Int32, new: Bool) -> String {
                    var value: OpaquePointer?
                    let code = new ? sqlite3_preupdate_new(connection, column, &value) : sqlite3_preupdate_old(connection, column, &value)
                    guard code == SQLITE_OK, let value, sqlite3_value_type(value) == SQLITE_TEXT,
                          let bytes = sqlite3_value_text(value) else { return "" }
                    return String(cString: bytes)
                }
                switch (name, operation) {
                case ("added", SQLITE_DELETE):
                    var value: OpaquePointer?
                    if sqlite3_preupdate_old(connection, 1, &value) == SQLITE_OK, let value {
                        probe.added = (sqlite3_value_type(value) == SQLITE_NULL, value)
                    }
                case (_, SQLITE_INSERT): probe.seen[name + " insert new"] = text(1, new: true)
                case (_, SQLITE_DELETE): probe.seen[name + " delete old"] = text(1, new: false)
                default:
                    probe.seen[name + " update old"] = text(1, new: false)
                    probe.seen[name + " update new"] = text(1, new: true)
                }
            }, Unmanaged.passUnretained(probe).toOpaque())
            defer { sqlite3_preupdate_hook(handle, nil, nil) }
            // Column 1 is generated VIRTUAL: numbered by storage, value 1 is the next column's.
            let script = """
                CREATE TABLE r(a TEXT, g AS (a || 'x'), s TEXT);
                CREATE TABLE w(a TEXT, g AS (a || 'x'), s TEXT PRIMARY KEY) WITHOUT ROWID;
                INSERT INTO r VALUES ('a', 'stored'); UPDATE r SET a = 'b'; DELETE FROM r;
                INSERT INTO w VALUES ('a', 'stored'); UPDATE w SET a = 'b'; DELETE FROM w;
                CREATE TABLE k(g AS (1), id INTEGER PRIMARY KEY, s TEXT); INSERT INTO k VALUES (5, 'stored'); DELETE FROM k;
                CREATE TABLE added(a); INSERT INTO added VALUES (1);
                ALTER TABLE added ADD COLUMN b DEFAULT 'default'; DELETE FROM added;
                """
            return sqlite3_exec(handle, script, nil, nil, nil) == SQLITE_OK ? probe : nil
        }
    }
}
