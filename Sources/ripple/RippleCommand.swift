import ArgumentParser

/// `ripple`: the store's command-line tool. Each subcommand lives in its own file and is listed
/// in ``configuration``.
///
/// Named `RippleCommand` so as not to shadow the `Ripple` module.
@main
struct RippleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ripple",
        abstract: "Ripple: a SQLite-backed collection store whose live queries deliver changesets.",
        subcommands: [DemoCommand.self, ReplayCommand.self, CrashTestCommand.self, CrashTestChildCommand.self, FuzzCommand.self,
                      HistoryCommand.self, InfoCommand.self, WatchCommand.self, StressCommand.self,
                      StressChildCommand.self]
    )
}
