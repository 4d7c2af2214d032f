@_spi(CourierInternals) import CourierCore
import Foundation
import Logging

/// Keeps what a `Logger` made with ``logger`` logs, with the level of each line.
final class LogRecorder: Sendable {
    struct Line: Sendable {
        var level: Logger.Level
        var message: String
    }

    private let recorded = Locked<[Line]>([])

    /// Every message so far.
    var messages: [String] { recorded.withLock { $0.map(\.message) } }

    /// Every line so far.
    var lines: [Line] { recorded.withLock { $0 } }

    /// A logger that writes here, at `trace` unless its level is changed.
    var logger: Logger {
        Logger(label: "courier-tests") { _ in Handler(recorder: self) }
    }

    /// The lines once `done` holds for them (waits up to 10 s: event monitors log from a task
    /// of their own).
    func lines(waitingFor done: ([Line]) -> Bool) async -> [Line] {
        let deadline = ContinuousClock.now + .seconds(10)
        while !done(lines), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return lines
    }

    fileprivate func append(_ line: Line) {
        recorded.withLock { $0.append(line) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            recorder.append(Line(level: event.level, message: "\(event.message)"))
        }
    }
}
