#if Sync
import Foundation
import Logging
import RippleSync

/// A swift-log handler that writes each message as one line of JSON, for log collectors:
///
/// ```json
/// {"time":"2026-12-06T03:12:45.120Z","level":"warning","label":"ripple-server","message":"the feed failed; …","metadata":{}}
/// ```
///
/// `metadata` holds the logger's metadata, its metadata provider's and the message's (nested
/// dictionaries and arrays as JSON objects and arrays; every other value as its text), and an
/// error logged with the message under `error`. `ripple-server serve --log-format json` uses it.
///
/// ```swift
/// let logger = Logger(label: "ripple-server") { JSONLogHandler(label: $0) }
/// ```
public struct JSONLogHandler: LogHandler {
    /// The least level it writes.
    public var logLevel: Logger.Level = .info
    /// Metadata every line carries (a message's own metadata wins over it).
    public var metadata: Logger.Metadata = [:]
    /// Metadata gathered for every line (from a task-local context, say).
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let write: @Sendable (String) -> Void

    /// A handler writing to standard error (each line written whole, with one `write`).
    public init(label: String, metadataProvider: Logger.MetadataProvider? = nil) {
        self.init(label: label, metadataProvider: metadataProvider) { line in
            let bytes = Array(line.utf8)
            bytes.withUnsafeBufferPointer { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = Foundation.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                    if written <= 0 { return }
                    offset += written
                }
            }
        }
    }

    /// A handler handing each line (ending with a newline) to `write`.
    public init(label: String, metadataProvider: Logger.MetadataProvider? = nil, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.write = write
    }

    /// One key of ``metadata``.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes `event` as one line of JSON.
    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let own = event.metadata { merged.merge(own) { $1 } }
        if let error = event.error { merged["error"] = .string(String(describing: error)) }
        var line = #"{"time":"#
        line += JSONBytes.quoted(Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
        line += #","level":"#
        line += JSONBytes.quoted(event.level.rawValue)
        line += #","label":"#
        line += JSONBytes.quoted(label)
        line += #","message":"#
        line += JSONBytes.quoted(event.message.description)
        line += #","metadata":"#
        Self.append(.dictionary(merged), to: &line)
        line += "}\n"
        write(line)
    }

    /// `value` as JSON.
    static func append(_ value: Logger.MetadataValue, to line: inout String) {
        switch value {
        case .string(let text): line += JSONBytes.quoted(text)
        case .stringConvertible(let value): line += JSONBytes.quoted(value.description)
        case .array(let values):
            line += "["
            for (index, value) in values.enumerated() {
                if index > 0 { line += "," }
                append(value, to: &line)
            }
            line += "]"
        case .dictionary(let values):
            line += "{"
            for (index, key) in values.keys.sorted().enumerated() {
                if index > 0 { line += "," }
                line += JSONBytes.quoted(key)
                line += ":"
                append(values[key]!, to: &line)
            }
            line += "}"
        }
    }
}
#endif
