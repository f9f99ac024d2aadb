import RippleSQLite

extension Database {
    /// Declares that the schema changes this write transaction made so far keep the tables'
    /// history: they only appended columns to tables (`ALTER TABLE … ADD COLUMN`) or renamed
    /// columns in place (`ALTER TABLE … RENAME COLUMN`), so that every column stays at its
    /// position. The commit then logs no change of unknown extent: live queries still run again
    /// (the schema changed), but history crosses the commit — a row from before it reads NULL in
    /// the appended columns, and a renamed column holds its values under its new name.
    ///
    /// Any other schema change in the same transaction (a table made, dropped or rebuilt, a
    /// column dropped) breaks history: declaring it is the caller's error. Statements after the
    /// declaration are captured against the new schema.
    ///
    /// - Throws: what reading the schema throws.
    package func declareHistoryPreservingSchemaChange() throws {
        guard let changeLog else { return }
        try changeLog.capture.refreshSchemaIfNeeded(self)
        changeLog.schemaChangeKeepsHistory = true
    }
}
