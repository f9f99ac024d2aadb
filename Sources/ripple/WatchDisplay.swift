import Foundation
import Ripple
import RippleTesting

/// What `ripple watch` shows of each event: in a terminal, the list redrawn in place; otherwise
/// each event printed after the one before (plain text, no escape codes); or one JSON line each.
/// Used on one queue at a time (the watch's).
final class WatchDisplay {
    enum Mode {
        /// Standard output is a terminal: each event redraws the screen (the alternate screen,
        /// left when the watch ends, with the cursor and echo as they were).
        case terminal
        /// Each event is printed below the one before.
        case plain
        /// Each event is one line of JSON: a ``Transcript/Step``.
        case json
    }

    let mode: Mode
    private let database: String
    private let query: WatchQuery
    /// The lines of the last event, drawn again when the terminal is resized.
    private var lastLines: [String] = []
    /// The terminal's settings before echo was turned off, to restore.
    private var savedSettings: termios?
    /// Whether the terminal shows the watch's screen (between ``begin()`` and ``end()``).
    private var isOnScreen = false

    init(mode: Mode, database: String, query: WatchQuery) {
        self.mode = mode
        self.database = database
        self.query = query
    }

    /// Shows what comes before the first event: in a terminal, switches to the alternate screen,
    /// hides the cursor and stops echoing keys (which would scribble over the list); in plain
    /// text, the query and the legend.
    func begin() {
        switch mode {
        case .terminal:
            var settings = termios()
            if isatty(STDIN_FILENO) == 1 && tcgetattr(STDIN_FILENO, &settings) == 0 {
                savedSettings = settings
                settings.c_lflag &= ~tcflag_t(ECHO)
                tcsetattr(STDIN_FILENO, TCSANOW, &settings)
            }
            Console.output(Escape.alternateScreen + Escape.hideCursor)
            isOnScreen = true
            draw()
        case .plain:
            Console.output(heading.joined(separator: "\n") + "\n")
        case .json:
            break
        }
    }

    /// Shows `event`, which follows the list `previous`. Throws when its JSON cannot be encoded.
    func show(_ event: LiveQueryEvent<Row>, previous: [Row]) throws {
        switch mode {
        case .terminal:
            lastLines = lines(event, previous: previous)
            draw()
        case .plain:
            Console.output("\n" + lines(event, previous: previous).joined(separator: "\n") + "\n")
        case .json:
            Console.output(try EventText.jsonLine(step(event)) + "\n")
        }
    }

    /// Draws the last event again, at the terminal's size now (after a resize).
    func redraw() {
        if isOnScreen { draw() }
    }

    /// Leaves the terminal as the watch found it (once; later calls do nothing).
    func end() {
        guard isOnScreen else { return }
        isOnScreen = false
        Console.output(Escape.showCursor + Escape.mainScreen)
        if var settings = savedSettings { tcsetattr(STDIN_FILENO, TCSANOW, &settings) }
    }

    /// `event` as a transcript step, each row a record (see ``record(_:dropping:)``).
    func step(_ event: LiveQueryEvent<Row>) -> Transcript.Step {
        let dropping = query.hidesFirstColumn ? 1 : 0
        return Transcript.Step(version: event.version, previousVersion: event.previousVersion,
                               snapshot: event.snapshot.map { Self.record($0, dropping: dropping) },
                               changeset: Transcript.Lists(event.changeset),
                               updatedColumns: event.updatedColumns.map { $0.sorted() })
    }

    // MARK: Text

    /// The lines above the events: the file, the query and the legend.
    private var heading: [String] {
        let arguments = query.arguments.isEmpty ? "" : "   with ? = " + query.arguments.map(\.description).joined(separator: ", ")
        return ["ripple watch \(database)" + (mode == .terminal ? "   (Ctrl-C to quit)" : ""),
                "query: " + query.sql + arguments,
                EventText.legend]
    }

    /// The event as a list view shows it, each row as its values in aligned columns (numbers
    /// to the right; the identity the command added left out), under the columns' names.
    private func lines(_ event: LiveQueryEvent<Row>, previous: [Row]) -> [String] {
        let hidden = query.hidesFirstColumn ? 1 : 0
        // The rows' own names: a column added to the table since the watch began shows too.
        let columns = (event.snapshot.first ?? previous.first)?.columnNames ?? query.columns
        let names = columns.dropFirst(hidden).map { (text: Self.oneLine($0), isNumber: false) }
        let shown = event.snapshot + event.changeset.deletes.map { previous[$0] }
        var widths = names.map(\.text.count)
        for row in shown {
            for (column, cell) in Self.cells(row, dropping: hidden).enumerated() where column < widths.count {
                widths[column] = max(widths[column], cell.text.count)
            }
        }
        func aligned(_ cells: [(text: String, isNumber: Bool)]) -> String {
            zip(cells, widths).map { cell, width in
                let padding = String(repeating: " ", count: max(0, width - cell.text.count))
                return cell.isNumber ? padding + cell.text : cell.text + padding
            }.joined(separator: "  ").trimmingSuffix(" ")
        }
        return EventText.lines(event, previous: previous, columnHeader: aligned(names)) { row in
            aligned(Self.cells(row, dropping: hidden))
        }
    }

    /// Clears the screen and draws the heading (wrapped) and the last event, cut to the
    /// terminal's size.
    private func draw() {
        let size = Self.terminalSize()
        var lines = heading.flatMap { Self.wrapped($0, width: size.columns) } + [""] + lastLines
        if lines.count > size.rows {
            let hidden = lines.count - (size.rows - 1)
            lines = lines.prefix(size.rows - 1) + ["    … \(hidden) more lines"]
        }
        let frame = lines.map { String($0.prefix(size.columns)) + Escape.clearLine }.joined(separator: "\n")
        Console.output(Escape.home + frame + Escape.clearBelow)
    }

    /// `line` in lines of at most `width` characters, broken at spaces where it can be.
    private static func wrapped(_ line: String, width: Int) -> [String] {
        var lines: [String] = []
        var rest = Substring(line)
        while rest.count > width {
            let limit = rest.index(rest.startIndex, offsetBy: width)
            let cut = rest[...limit].lastIndex(of: " ").flatMap { $0 > rest.startIndex ? $0 : nil } ?? limit
            lines.append(String(rest[..<cut]))
            rest = rest[cut...].drop { $0 == " " }
        }
        return lines + [String(rest)]
    }

    /// The terminal's rows and columns (24 × 80 when it does not say).
    private static func terminalSize() -> (rows: Int, columns: Int) {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 1, size.ws_col > 0 else { return (24, 80) }
        return (Int(size.ws_row), Int(size.ws_col))
    }

    /// The escape sequences of the terminal frames (xterm's, which terminals today understand).
    private enum Escape {
        static let alternateScreen = "\u{1B}[?1049h"
        static let mainScreen = "\u{1B}[?1049l"
        static let hideCursor = "\u{1B}[?25l"
        static let showCursor = "\u{1B}[?25h"
        static let home = "\u{1B}[H"
        static let clearLine = "\u{1B}[K"
        static let clearBelow = "\u{1B}[J"
    }

    // MARK: Values

    /// The widest a value is shown in a column, in characters (the JSON lines hold it whole).
    static let cellLimit = 40

    /// The values of `row` as text, and whether each is a number; its first `dropping` columns
    /// left out.
    static func cells(_ row: Row, dropping: Int) -> [(text: String, isNumber: Bool)] {
        row.values.dropFirst(dropping).map { value in
            switch value {
            case .integer, .real: (text(value), true)
            default: (text(value), false)
            }
        }
    }

    /// A value as a cell shows it, on one line: text as it is (see ``oneLine(_:)``), numbers as
    /// Swift writes them, `NULL`, blobs in hex (`x'00ff'`); cut to ``cellLimit``.
    static func text(_ value: SQLValue) -> String {
        let text: String
        switch value {
        case .null: text = "NULL"
        case .integer(let integer): text = String(integer)
        case .real(let real): text = String(real)
        case .text(let string): text = oneLine(string)
        case .blob(let bytes): text = "x'" + bytes.prefix(cellLimit).map { String(format: "%02x", $0) }.joined() + "'"
        }
        return text.count <= cellLimit ? text : String(text.prefix(cellLimit - 1)) + "…"
    }

    /// `string` with its control characters escaped (`\n`, `\u{1B}`): on one line, and unable to
    /// move the cursor or recolour the terminal, whoever wrote the data or named the columns.
    static func oneLine(_ string: String) -> String {
        string.unicodeScalars.map { scalar in
            scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) ? scalar.escaped(asASCII: true) : String(scalar)
        }.joined()
    }

    /// `row` as a transcript record: an object of its columns (the first `dropping` left out; of
    /// two columns with one name, the first), text and integers as they are, reals as numbers
    /// (infinities, which JSON has not, as the strings `"Infinity"` and `"-Infinity"`), blobs in
    /// base64 (as `JSONEncoder` writes `Data`), `NULL` as `null`.
    static func record(_ row: Row, dropping: Int) -> JSONValue {
        var object: [String: JSONValue] = [:]
        for (name, value) in zip(row.columnNames, row.values).dropFirst(dropping) where object[name] == nil {
            switch value {
            case .null: object[name] = .null
            case .integer(let integer): object[name] = .int(integer)
            case .real(let real): object[name] = real.isFinite ? .double(real) : .string(real > 0 ? "Infinity" : "-Infinity")
            case .text(let text): object[name] = .string(text)
            case .blob(let bytes): object[name] = .string(Data(bytes).base64EncodedString())
            }
        }
        return .object(object)
    }
}

private extension String {
    /// The string without the trailing run of `character`.
    func trimmingSuffix(_ character: Character) -> String {
        var text = self
        while text.last == character { text.removeLast() }
        return text
    }
}
