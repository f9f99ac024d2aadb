import Foundation
import Ripple
import RippleDiff

/// What a live query delivered, event by event, as a readable JSON file to keep beside your
/// tests: record it with ``TranscriptRecorder``, check it with ``replay(_:)``, compare a fresh
/// run with it with `expectTranscript(_:matches:versions:)`.
///
/// ```json
/// {
///   "format": 1,
///   "query": "SELECT … FROM \"todos\" WHERE … ORDER BY …",
///   "steps": [
///     {
///       "changeset": {"deletes": [], "inserts": [0, 1], "moves": [], "updates": []},
///       "previousVersion": null,
///       "snapshot": [
///         {"done": false, "id": 1, "rank": 10, "title": "Buy milk"},
///         {"done": false, "id": 2, "rank": 20, "title": "Pay rent"}
///       ],
///       "updatedColumns": [],
///       "version": 3
///     },
///     …
///   ]
/// }
/// ```
///
/// Each step is one `LiveQueryEvent`: its versions, its snapshot (each record as the JSON its
/// `Encodable` conformance writes), its changeset's lists (indices as in `Changeset`) and, for
/// each update, the columns that changed. Keys are sorted and each record, index list or pair
/// stays on one line, so a transcript diffs well under version control. Records are kept as
/// ``JSONValue``s: a transcript loads and replays without the record type.
public struct Transcript: Codable, Sendable, Equatable {
    /// The file format this version of RippleTesting reads and writes.
    public static let currentFormat = 1

    /// The file format (``currentFormat``).
    public var format: Int
    /// The live query, readably (its `LiveQuery/description`).
    public var query: String
    /// The events, in the order they were delivered.
    public var steps: [Step]

    /// A transcript of `steps` (empty to start with).
    public init(query: String, steps: [Step] = []) {
        self.format = Self.currentFormat
        self.query = query
        self.steps = steps
    }

    /// One delivered event.
    public struct Step: Codable, Sendable, Equatable {
        /// The version the snapshot was read at.
        public var version: Int64
        /// The version of the step before, `nil` for the first (the initial snapshot).
        public var previousVersion: Int64?
        /// The query's result at ``version``.
        public var snapshot: [JSONValue]
        /// From the step before's snapshot to this one.
        public var changeset: Lists
        /// For each of the changeset's updates, in order, the columns that changed (sorted).
        public var updatedColumns: [[String]]

        /// A step from its parts.
        public init(version: Int64, previousVersion: Int64?, snapshot: [JSONValue], changeset: Lists,
                    updatedColumns: [[String]]) {
            self.version = version
            self.previousVersion = previousVersion
            self.snapshot = snapshot
            self.changeset = changeset
            self.updatedColumns = updatedColumns
        }

        /// The step for `event`, its records encoded by `encoder`.
        public init<Element: Encodable>(_ event: LiveQueryEvent<Element>,
                                        encoder: JSONEncoder = JSONEncoder()) throws {
            self.init(version: event.version, previousVersion: event.previousVersion,
                      snapshot: try JSONValue.array(encoding: event.snapshot, with: encoder),
                      changeset: Lists(event.changeset),
                      updatedColumns: event.updatedColumns.map { $0.sorted() })
        }

        /// "step 3 (v9)": how messages name the step at `index`.
        static func name(_ index: Int, version: Int64?) -> String {
            version.map { "step \(index) (v\($0))" } ?? "step \(index)"
        }

        private enum CodingKeys: String, CodingKey {
            case version, previousVersion, snapshot, changeset, updatedColumns
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            version = try container.decode(Int64.self, forKey: .version)
            previousVersion = try container.decodeIfPresent(Int64.self, forKey: .previousVersion)
            snapshot = try container.decode([JSONValue].self, forKey: .snapshot)
            changeset = try container.decode(Lists.self, forKey: .changeset)
            updatedColumns = try container.decodeIfPresent([[String]].self, forKey: .updatedColumns) ?? []
        }

        /// Writes every key, `"previousVersion": null` included.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(version, forKey: .version)
            try container.encode(previousVersion, forKey: .previousVersion)
            try container.encode(snapshot, forKey: .snapshot)
            try container.encode(changeset, forKey: .changeset)
            try container.encode(updatedColumns, forKey: .updatedColumns)
        }
    }

    /// A changeset's lists, as in `Changeset`: deletes are old indices, inserts new ones,
    /// updates and moves `{"old": …, "new": …}` pairs ascending by new index.
    public struct Lists: Codable, Sendable, Equatable, CustomStringConvertible {
        public var deletes: [Int]
        public var inserts: [Int]
        public var updates: [Pair]
        public var moves: [Pair]

        /// Lists from their parts.
        public init(deletes: [Int] = [], inserts: [Int] = [], updates: [Pair] = [], moves: [Pair] = []) {
            self.deletes = deletes
            self.inserts = inserts
            self.updates = updates
            self.moves = moves
        }

        /// The lists of `changeset`.
        public init(_ changeset: Changeset) {
            self.init(deletes: changeset.deletes, inserts: changeset.inserts,
                      updates: changeset.updates.map(Pair.init), moves: changeset.moves.map(Pair.init))
        }

        /// The changeset from `oldCount` to `newCount` elements these lists describe, checked
        /// (see `Changeset.init(oldCount:newCount:deletes:inserts:updates:moves:)`).
        public func changeset(oldCount: Int, newCount: Int) throws(ChangesetListsError) -> Changeset {
            try Changeset(oldCount: oldCount, newCount: newCount, deletes: deletes, inserts: inserts,
                          updates: updates.map(\.indexPair), moves: moves.map(\.indexPair))
        }

        public var description: String {
            "deletes \(deletes), inserts \(inserts), updates \(updates), moves \(moves)"
        }
    }

    /// An element's index in the old and in the new list.
    public struct Pair: Codable, Sendable, Hashable, CustomStringConvertible {
        public var old: Int
        public var new: Int

        /// A pair.
        public init(old: Int, new: Int) {
            self.old = old
            self.new = new
        }

        /// The pair of `pair`.
        public init(_ pair: Changeset.IndexPair) {
            self.init(old: pair.old, new: pair.new)
        }

        /// As a `Changeset.IndexPair`.
        public var indexPair: Changeset.IndexPair { Changeset.IndexPair(old: old, new: new) }

        public var description: String { "\(old)→\(new)" }
    }

    // MARK: Coding

    private enum CodingKeys: String, CodingKey {
        case format, query, steps
    }

    /// Decodes a transcript; fails unless `format` is ``currentFormat``.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        format = try container.decode(Int.self, forKey: .format)
        guard format == Self.currentFormat else {
            throw DecodingError.dataCorruptedError(
                forKey: .format, in: container,
                debugDescription: TranscriptError.unsupportedFormat(format).description)
        }
        query = try container.decode(String.self, forKey: .query)
        steps = try container.decode([Step].self, forKey: .steps)
    }

    // MARK: Files

    /// The transcript as JSON text: sorted keys, one line per record, index list or pair.
    public func jsonData() throws(TranscriptError) -> Data {
        let value: JSONValue
        do {
            value = try JSONValue(encoding: self)
        } catch {
            throw TranscriptError("cannot encode the transcript: \(error)")
        }
        return Data((value.prettyText() + "\n").utf8)
    }

    /// A transcript read from JSON text.
    public init(jsonData data: Data) throws(TranscriptError) {
        struct Header: Decodable { var format: Int? }
        let header: Header
        do {
            header = try JSONDecoder().decode(Header.self, from: data)
        } catch {
            throw TranscriptError("not a transcript (a JSON object with a \"format\"): \(error)")
        }
        guard let format = header.format else { throw TranscriptError("not a transcript: no \"format\"") }
        guard format == Self.currentFormat else { throw TranscriptError.unsupportedFormat(format) }
        do {
            self = try JSONDecoder().decode(Transcript.self, from: data)
        } catch {
            throw TranscriptError("invalid transcript: \(error)")
        }
    }

    /// Writes the transcript to `url` (see ``jsonData()``), creating its folder if needed.
    public func save(to url: URL) throws(TranscriptError) {
        let data = try jsonData()
        do {
            // The first recording of a test usually goes into a folder that does not exist yet.
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try data.write(to: url, options: .atomic)
        } catch {
            throw TranscriptError("cannot write \(url.path): \(error.localizedDescription)")
        }
    }

    /// Reads the transcript at `url`; fails unless its `format` is ``currentFormat``.
    public static func load(from url: URL) throws(TranscriptError) -> Transcript {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw TranscriptError("cannot read \(url.path): \(error.localizedDescription)")
        }
        do {
            return try Transcript(jsonData: data)
        } catch {
            throw TranscriptError("\(url.lastPathComponent): \(error.description)")
        }
    }
}

/// A transcript that cannot be read, written or replayed, or that differs from the one expected.
public struct TranscriptError: Error, CustomStringConvertible, Equatable, Sendable {
    /// What went wrong, in words, naming the step (`step 3 (v9): …`) when there is one.
    public let description: String
    /// The index of the step concerned, if any.
    public let step: Int?

    /// An error with its description.
    public init(_ description: String, step: Int? = nil) {
        self.description = description
        self.step = step
    }

    static func unsupportedFormat(_ format: Int) -> TranscriptError {
        TranscriptError("unsupported transcript format \(format): this version of RippleTesting reads "
                        + "format \(Transcript.currentFormat) only")
    }
}
