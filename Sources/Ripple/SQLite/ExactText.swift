/// Text compared as SQLite compares it, by its UTF-8 bytes. Swift's `String` equality folds
/// canonically equivalent spellings (`"\u{e9}"` and `"e\u{301}"` are equal strings): as the key
/// of a cache of SQL or of arguments, it would take one text for another.
struct ExactText: Hashable, Sendable {
    let text: String

    init(_ text: String) { self.text = text }

    static func == (lhs: ExactText, rhs: ExactText) -> Bool {
        lhs.text.utf8.elementsEqual(rhs.text.utf8)
    }

    func hash(into hasher: inout Hasher) {
        let hashed: Void? = text.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if hashed == nil { Array(text.utf8).withUnsafeBytes { hasher.combine(bytes: $0) } }
    }
}
