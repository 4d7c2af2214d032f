import Courier
import CourierServiceLifecycle
import Foundation
import Logging
import ServiceLifecycle

/// `CourierTestHelper service FAULT_URL NAME DEADLINE_MS`: an `HTTPSessionService` in a
/// `ServiceGroup` that shuts down gracefully on `SIGTERM`, beside a client service that reads
/// the fault server's held stream `/ndjson/NAME` through the session. The client is listed
/// first, so the group shuts the session down first (a group goes in reverse order) while the
/// stream is still held. Says:
///
///     holding              the stream's first line arrived (the group traps SIGTERM by then)
///     refused MESSAGE      a request made once the session's shutdown began, refused
///     accepted             the same request, had it been sent
///     finished LINES       the held stream ended with LINES lines (after /release/NAME)
///     cancelled            the held stream was cancelled (at the shutdown deadline)
///     stopped              the group's run returned
enum ServiceScenario {
    static func run(fault: URL, name: String, deadline: Duration) async throws {
        let shutdown = AsyncStream.makeStream(of: Void.self)
        var logger = Logger(label: "courier-helper") { _ in ShutdownWatcher(began: shutdown.continuation) }
        logger.logLevel = .info
        let api = HTTPSessionManager(baseURL: fault, configuration: .ephemeral, logger: logger)
        let watcher = Task {
            for await _ in shutdown.stream { break }
            do {
                _ = try await api.GET("echo", serializer: DataResponseSerializer())
                say("accepted")
            } catch CourierError.sessionInvalidated(let context) {
                say("refused \(context.message)")
            } catch {
                say("failed \(error)")
            }
        }
        let group = ServiceGroup(
            services: [
                HeldStreamClient(api: api, name: name), HTTPSessionService(manager: api, shutdownDeadline: deadline),
            ],
            gracefulShutdownSignals: [.sigterm], cancellationSignals: [],
            logger: Logger(label: "courier-helper-group") { _ in SwiftLogNoOpLogHandler() })
        try await group.run()
        await watcher.value
        say("stopped")
    }
}

/// Reads the held stream through the session, says how it ended, then waits for the group's
/// shutdown (a service that returned first would end the group).
private struct HeldStreamClient: Service {
    let api: HTTPSessionManager
    let name: String

    func run() async throws {
        var count = 0
        do {
            let (_, body) = try await api.stream(.get, "ndjson/\(name)")
            for try await _ in body.lines {
                count += 1
                if count == 1 { say("holding") }
            }
            say("finished \(count)")
        } catch is CancellationError {
            say("cancelled")
        } catch {
            say("failed \(error)")
        }
        try? await gracefulShutdown()
    }
}

/// Tells `began` when the session logs that its shutdown began.
private struct ShutdownWatcher: LogHandler {
    let began: AsyncStream<Void>.Continuation
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        if event.message.description.hasPrefix("Courier session shutting down") { began.yield() }
    }
}
