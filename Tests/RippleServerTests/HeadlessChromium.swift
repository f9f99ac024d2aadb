#if Sync
import Foundation
import Logging
import Ripple
import RippleTesting
import WSClient

/// A real headless Chromium (Debian's `chromium`), driven over the Chrome DevTools Protocol on
/// a WebSocket: open a page, evaluate JavaScript in it (awaiting promises), take screenshots.
/// No mock of the browser: the page runs as it would for a person.
final class HeadlessChromium: Sendable {
    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// The browser's executable, when one is installed.
    static let executable: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Whether browser tests run: a browser is installed, or this is CI (`CI=true`), where a
    /// missing browser must fail the run rather than skip.
    static var testsRun: Bool { executable != nil || ProcessInfo.processInfo.environment["CI"] == "true" }

    private let process: Process
    private let profile: TemporaryDirectory
    private let devTools: DevToolsConnection

    private init(process: Process, profile: TemporaryDirectory, devTools: DevToolsConnection) {
        (self.process, self.profile, self.devTools) = (process, profile, devTools)
    }

    /// Starts a headless browser with a fresh profile, `width` × `height` pixels.
    static func start(width: Int = 1000, height: Int = 760) async throws -> HeadlessChromium {
        guard let executable else { throw Failure("chromium is not installed (Debian: apt-get install chromium)") }
        let profile = try TemporaryDirectory(prefix: "ripple-chromium")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                             "--no-default-browser-check", "--disable-extensions", "--mute-audio",
                             "--remote-debugging-port=0", "--remote-allow-origins=*",
                             "--user-data-dir=\(profile.url.path)", "--window-size=\(width),\(height)", "about:blank"]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try ProcessLaunch.run(process)
        // The browser names its DevTools endpoint on stderr; the rest of stderr is drained
        // (unread, a full pipe would stop the browser).
        let endpoint = FirstOutcome<Result<String, Failure>>()
        let reader = errors.fileHandleForReading
        let thread = Thread {
            var text = ""
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                guard !endpoint.isDecided else { continue }
                text += String(decoding: data, as: UTF8.self)
                if let range = text.range(of: #"DevTools listening on (ws://\S+)"#, options: .regularExpression) {
                    endpoint.finish(.success(String(text[range].dropFirst("DevTools listening on ".count))))
                }
            }
            endpoint.finish(.failure(Failure("chromium ended without a DevTools endpoint:\n\(text.suffix(2_000))")))
        }
        thread.name = "chromium stderr"
        thread.start()
        let limit = Task {
            try await Task.sleep(for: .seconds(60))
            endpoint.finish(.failure(Failure("chromium named no DevTools endpoint within 60 s")))
        }
        defer { limit.cancel() }
        switch await endpoint.value {
        case .failure(let failure):
            process.terminate()
            throw failure
        case .success(let url):
            let devTools = try await DevToolsConnection.open(url)
            return HeadlessChromium(process: process, profile: profile, devTools: devTools)
        }
    }

    /// Opens `url` in a new page (tab) and returns it once it has loaded.
    func open(_ url: String) async throws -> Page {
        let target = try await devTools.call("Target.createTarget", ["url": "about:blank"])
        guard let targetID = target["targetId"] as? String else { throw Failure("no target id in \(target)") }
        let attached = try await devTools.call("Target.attachToTarget", ["targetId": targetID, "flatten": true])
        guard let session = attached["sessionId"] as? String else { throw Failure("no session id in \(attached)") }
        let page = Page(devTools: devTools, session: session)
        _ = try await page.call("Page.enable")
        _ = try await page.call("Runtime.enable")
        let loaded = try await page.call("Page.navigate", ["url": url])
        if let error = loaded["errorText"] as? String { throw Failure("\(url) did not load: \(error)") }
        _ = try await page.evaluate("""
            document.readyState === "complete" ? true
                : new Promise((resolve) => addEventListener("load", () => resolve(true), { once: true }))
            """)
        return page
    }

    /// Closes the browser.
    /// Starts a browser, runs `body` with it, and stops it (its process ended and reaped) before
    /// returning — when `body` returns and when it throws.
    static func with<Result>(width: Int = 1000, height: Int = 760, isolation: isolated (any Actor)? = #isolation,
                             _ body: (HeadlessChromium) async throws -> Result) async throws -> Result {
        let browser = try await start(width: width, height: height)
        do {
            let result = try await body(browser)
            await browser.stop()
            return result
        } catch {
            await browser.stop()
            throw error
        }
    }

    func stop() async {
        _ = try? await devTools.call("Browser.close")
        devTools.close()
        if process.isRunning { process.terminate() }
        _ = try? await onOwnThread("chromium exit") { [process] in try Wait.exit(of: process, "chromium", within: .seconds(30)) }
    }

    /// One page of the browser.
    struct Page: Sendable {
        fileprivate let devTools: DevToolsConnection
        fileprivate let session: String

        fileprivate func call(_ method: String, _ parameters: [String: any Sendable] = [:]) async throws -> [String: Any] {
            try await devTools.call(method, parameters, session: session)
        }

        /// The value of `expression` (a promise is awaited), converted through JSON.
        @discardableResult
        func evaluate(_ expression: String) async throws -> Any? {
            let answer = try await call("Runtime.evaluate", ["expression": expression, "awaitPromise": true,
                                                             "returnByValue": true])
            if let exception = answer["exceptionDetails"] as? [String: Any] {
                let thrown = (exception["exception"] as? [String: Any])?["description"] as? String
                throw Failure("the page threw: \(thrown ?? exception["text"] as? String ?? "\(exception)")")
            }
            return (answer["result"] as? [String: Any])?["value"]
        }

        /// A PNG of what the page shows.
        func screenshot() async throws -> Data {
            let answer = try await call("Page.captureScreenshot", ["format": "png"])
            guard let base64 = answer["data"] as? String, let png = Data(base64Encoded: base64) else {
                throw Failure("no screenshot in the answer")
            }
            return png
        }
    }
}

/// One WebSocket to the browser's DevTools endpoint: commands with ids, answers matched to them
/// (events are ignored).
private final class DevToolsConnection: Sendable {
    private struct State {
        var next = 1
        var waiting: [Int: CheckedContinuation<Data, any Error>] = [:]
        var ended: (any Error)?
    }

    private let state = Locked(State())
    private let outgoing: AsyncStream<String>.Continuation
    private let task: Task<Void, Never>

    private init(outgoing: AsyncStream<String>.Continuation, task: Task<Void, Never>) {
        (self.outgoing, self.task) = (outgoing, task)
    }

    static func open(_ url: String) async throws -> DevToolsConnection {
        let (stream, outgoing) = AsyncStream<String>.makeStream()
        let opened = FirstOutcome<(any Error)?>()
        let connection = Locked<DevToolsConnection?>(nil)
        let task = Task {
            var configuration = WebSocketClientConfiguration()
            configuration.maxFrameSize = 1 << 28
            var reason: any Error = HeadlessChromium.Failure("the DevTools socket closed")
            do {
                try await WebSocketClient.connect(url: url, configuration: configuration,
                                                  logger: Logger(label: "ripple.tests.devtools")) { inbound, outbound, _ in
                    opened.finish(nil)
                    let writer = Task {
                        for await text in stream { try await outbound.write(.text(text)) }
                    }
                    defer { writer.cancel() }
                    for try await message in inbound.messages(maxSize: 1 << 28) {
                        if case .text(let text) = message { connection.withLock { $0 }?.receive(text) }
                    }
                }
            } catch {
                reason = error
            }
            opened.finish(reason)
            connection.withLock { $0 }?.end(reason)
        }
        let made = DevToolsConnection(outgoing: outgoing, task: task)
        connection.withLock { $0 = made }
        if let error = try await Wait.value("the DevTools socket to open", { await opened.value }) { throw error }
        return made
    }

    /// Sends a command and returns its `result`.
    func call(_ method: String, _ parameters: [String: any Sendable] = [:], session: String? = nil) async throws -> [String: Any] {
        let data: Data = try await Wait.value("DevTools' answer to \(method)") { [self] in
            try await withCheckedThrowingContinuation { continuation in
                let id = state.withLock { state -> Int? in
                    if state.ended != nil { return nil }
                    defer { state.next += 1 }
                    state.waiting[state.next] = continuation
                    return state.next
                }
                guard let id else {
                    continuation.resume(throwing: HeadlessChromium.Failure("the DevTools socket is closed"))
                    return
                }
                var message: [String: Any] = ["id": id, "method": method, "params": parameters]
                if let session { message["sessionId"] = session }
                do {
                    let text = String(decoding: try JSONSerialization.data(withJSONObject: message), as: UTF8.self)
                    outgoing.yield(text)
                } catch {
                    state.withLock { $0.waiting[id] = nil }
                    continuation.resume(throwing: error)
                }
            }
        }
        guard let answer = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw HeadlessChromium.Failure("an answer to \(method) that is not an object")
        }
        if let error = answer["error"] as? [String: Any] {
            throw HeadlessChromium.Failure("\(method) failed: \(error["message"] as? String ?? "\(error)")")
        }
        return answer["result"] as? [String: Any] ?? [:]
    }

    private func receive(_ text: String) {
        let data = Data(text.utf8)
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let id = object["id"] as? Int else { return }   // an event
        let waiter = state.withLock { $0.waiting.removeValue(forKey: id) }
        waiter?.resume(returning: data)
    }

    private func end(_ reason: any Error) {
        let waiters = state.withLock { state -> [CheckedContinuation<Data, any Error>] in
            state.ended = reason
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for waiter in waiters { waiter.resume(throwing: reason) }
    }

    func close() {
        outgoing.finish()
        task.cancel()
    }
}
#endif
