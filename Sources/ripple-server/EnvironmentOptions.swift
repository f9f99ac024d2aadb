#if Sync
import ArgumentParser
import Foundation

/// The options of `ripple-server`'s commands taken from the environment as well as from flags:
/// `--postgres` from `RIPPLE_POSTGRES`, `--jwks-url` from `RIPPLE_JWKS_URL` — the long name in
/// capitals, dashes as underscores, after `RIPPLE_`. A flag on the command line wins over the
/// variable; a boolean flag's variable is `1`, `true` or `yes` (on) or `0`, `false`, `no`
/// (off). This is how containers and process managers configure a node.
///
/// A variable that starts with `RIPPLE_` and names no option of the command run is reported on
/// standard error and ignored: a misspelt `RIPPLE_TABLE` ("names no option"), or an option of
/// another of these commands only (`RIPPLE_WRITES` for `serve`: "is an option of `check`, not
/// of `serve`") — either would otherwise be ignored without a word.
enum EnvironmentOptions {
    /// The commands that read the environment.
    static let commands: [String: any ParsableCommand.Type] = ["serve": ServeCommand.self, "check": CheckCommand.self]

    /// Variables of the `RIPPLE_` family that are not options: the token secret, and those of
    /// Ripple's own tests and tools (a test's environment reaches the nodes it starts).
    static let otherVariables: Set<String> = ["RIPPLE_SYNC_SECRET", "RIPPLE_POSTGRES_BIN", "RIPPLE_STRESS_NODE_LOG",
                                              "RIPPLE_FUZZ_CASES", "RIPPLE_FUZZ_SEED", "RIPPLE_WRITE_FIXTURE"]

    /// `arguments` (without the program's name) completed from `environment`, and notes about
    /// variables that name no option.
    static func complete(_ arguments: [String], environment: [String: String],
                         defaultCommand: String = "serve") -> (arguments: [String], notes: [String]) {
        let named = arguments.first.flatMap { commands[$0] != nil ? $0 : nil }
        // `ripple-server --postgres …` runs the default command; a word that is not an option
        // names another subcommand (demo, subscribe, …), which reads no environment.
        if named == nil, let first = arguments.first, !first.hasPrefix("-") { return (arguments, []) }
        let name = named ?? defaultCommand
        guard let command = commands[name] else { return (arguments, []) }
        let options = Self.options(of: command)
        let given = Set(arguments.compactMap { argument -> String? in
            guard argument.hasPrefix("--") else { return nil }
            return String(argument.dropFirst(2).prefix { $0 != "=" })
        })
        var completed = arguments
        var notes: [String] = []
        for (variable, value) in environment.sorted(by: { $0.key < $1.key }) where variable.hasPrefix("RIPPLE_") {
            guard !otherVariables.contains(variable) else { continue }
            let long = variable.dropFirst("RIPPLE_".count).lowercased().replacingOccurrences(of: "_", with: "-")
            guard let option = options.first(where: { $0.name == long }) else {
                let others = commands.filter { $0.key != name && Self.options(of: $0.value).contains { $0.name == long } }.keys.sorted()
                if others.isEmpty {
                    notes.append("\(variable) names no option of `ripple-server \(name)` (ignored)")
                } else {
                    notes.append("\(variable) is an option of `\(others.joined(separator: "` and `"))`, not of `\(name)`: ignored")
                }
                continue
            }
            guard !given.contains(long) else { continue }
            if option.isFlag {
                switch value.lowercased() {
                case "1", "true", "yes": completed.append("--" + long)
                case "0", "false", "no", "": break
                default: notes.append("\(variable)=\(value) is neither true nor false (ignored)")
                }
            } else {
                completed += ["--" + long, value]
            }
        }
        return (completed, notes)
    }

    /// The long names of `command`'s options and flags (option groups' included), as its help
    /// lists them after its usage line (the discussion above it has examples): `--postgres
    /// <postgres>` is an option, `--apply` a flag.
    static func options(of command: any ParsableCommand.Type) -> [(name: String, isFlag: Bool)] {
        let help = ServerCommand.helpMessage(for: command, columns: 10_000)
        var options: [(name: String, isFlag: Bool)] = []
        let lines = help.split(separator: "\n")
        for line in lines.drop(while: { !$0.hasPrefix("USAGE:") }).dropFirst() {
            let words = line.split(separator: " ").map(String.init)
            guard let index = words.firstIndex(where: { $0.hasPrefix("--") }), index <= 1,
                  words[..<index].allSatisfy({ $0.hasPrefix("-") && $0.hasSuffix(",") }) else { continue }
            let name = String(words[index].dropFirst(2))
            guard name != "help", name != "version", !options.contains(where: { $0.name == name }) else { continue }
            let takesValue = words.count > index + 1 && words[index + 1].hasPrefix("<")
            options.append((name, !takesValue))
        }
        return options
    }
}

extension ServerCommand {
    /// Parses the command line completed from the environment (see ``EnvironmentOptions``), then
    /// runs the command.
    static func main() async {
        let (arguments, notes) = EnvironmentOptions.complete(Array(CommandLine.arguments.dropFirst()),
                                                             environment: ProcessInfo.processInfo.environment)
        for note in notes {
            FileHandle.standardError.write(Data("ripple-server: \(note)\n".utf8))
        }
        await main(arguments)
    }
}
#endif
