import Courier
import Foundation

/// `courier ws://host/chat`: each line of standard input goes as a text message, and each
/// message that arrives is printed on a line of its own (a binary one as a note of its
/// size). At the end of standard input the command reads on until the server has been quiet
/// for `quietPeriod` (replies may still be on their way), then closes the WebSocket (1000)
/// and waits for the server's close; the server's close ends the command, with its code on
/// standard error.
struct WebSocketChat {
    let api: HTTPSessionManager
    let invocation: Invocation
    /// Prints the handshake's request and response heads (secrets redacted).
    let verbose: Bool
    /// After standard input ends, how long nothing must arrive before the close.
    let quietPeriod: Duration

    /// Whether `url` (as given on the command line) is a WebSocket URL.
    static func isWebSocketURL(_ url: String) -> Bool {
        let lower = url.prefix(6).lowercased()
        return lower.hasPrefix("ws://") || lower.hasPrefix("wss://")
    }

    func run() async throws {
        guard invocation.method == .get, case .none = invocation.body else {
            throw CLIError("A WebSocket takes headers (Name:value) and query items (name==value), not a body")
        }
        let socket = try await api.webSocket(invocation.url, headers: invocation.headers)
        if verbose {
            // On standard error: standard output carries the messages.
            var lines = ["> GET \(socket.request.path ?? "/") HTTP/1.1"]
            lines += socket.request.headerFields.map { "> \(Self.shown($0))" }
            lines.append("< \(socket.response.status.code) \(socket.response.status.reasonPhrase)")
            lines += socket.response.headerFields.map { "< \(Self.shown($0))" }
            FileHandle.standardError.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        }
        let lines = Self.standardInputLines()
        let arrivals = Arrivals()
        let sender = Task {
            for await line in lines {
                do {
                    try await socket.send(.text(line))
                } catch {
                    return
                }
            }
            guard await arrivals.waitForQuiet(quietPeriod) else { return }
            await socket.close()
        }
        defer { sender.cancel() }
        for try await message in socket.messages {
            await arrivals.note()
            switch message {
            case .text(let text): FileHandle.standardOutput.write(Data((text + "\n").utf8))
            case .data(let data):
                FileHandle.standardOutput.write(Data("+-- binary message of \(data.count) bytes --+\n".utf8))
            }
        }
        let code = socket.closeCode.map { " \($0.rawValue)" } ?? ""
        let reason = socket.closeReason.map { $0.isEmpty ? "" : " \($0)" } ?? ""
        FileHandle.standardError.write(Data("courier: the WebSocket closed\(code)\(reason)\n".utf8))
    }

    /// A field as `-v` prints it: the value of a secret one (`Authorization`, `Cookie`...)
    /// as `<redacted>`, as the logging monitor writes it, since a terminal's output ends up in
    /// logs and bug reports.
    static func shown(_ field: HTTPField) -> String {
        "\(field.name.rawName): \(LoggingMonitor.redactedFields.contains(field.name) ? "<redacted>" : field.value)"
    }

    /// Standard input's lines, read on a thread of its own (a blocking read would hold one
    /// of the few threads Swift's concurrency has).
    static func standardInputLines() -> AsyncStream<String> {
        AsyncStream { continuation in
            Thread.detachNewThread {
                while let line = readLine(strippingNewline: true) { continuation.yield(line) }
                continuation.finish()
            }
        }
    }
}

/// When a message last arrived, for the wait after the end of standard input.
private actor Arrivals {
    private var last = ContinuousClock.now

    func note() {
        last = .now
    }

    /// Returns once nothing has arrived for `period`, counted from now at the earliest: true,
    /// or false when the task was cancelled (the server closed first).
    func waitForQuiet(_ period: Duration) async -> Bool {
        last = .now
        while true {
            let due = last + period
            guard ContinuousClock.now < due else { return true }
            do {
                try await Task.sleep(until: due, clock: .continuous)
            } catch {
                return false
            }
        }
    }
}
