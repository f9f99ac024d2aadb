// The list-view models that check changesets (BatchUpdateListModel, SectionedListModel) live in
// RippleDiffTesting, which needs no SQLite; importing RippleTesting brings them too.
@_exported import RippleDiffTesting
