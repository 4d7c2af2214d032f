import Courier
import CourierServiceLifecycle
import Foundation
import Logging
import ServiceLifecycle
import Testing

/// `HTTPSessionService` in a real `ServiceGroup`, against the fault server's held stream
/// (`/ndjson/<name>` sends one line, then holds the rest until `/release/<name>`): the group's
/// graceful shutdown, triggered in process and by a real `SIGTERM` to a child process.
@Suite(.timeLimit(.minutes(10))) struct ServiceLifecycleTests {
    /// A manager on the fault server whose log (info and above) goes to `recorder`.
    private func manager(_ recorder: LogRecorder) async throws -> HTTPSessionManager {
        var logger = recorder.logger
        logger.logLevel = .info
        return HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: .ephemeral, logger: logger)
    }

    /// Starts reading the held stream `name` through `api`; returns once its first line has
    /// arrived, with the task that reads the rest (and returns every line).
    private func heldStream(_ api: HTTPSessionManager, _ name: String) async throws -> Task<[String], any Error> {
        let first = AsyncStream.makeStream(of: Void.self)
        let reader = Task {
            defer { first.continuation.finish() }
            var lines: [String] = []
            let (_, body) = try await api.stream(.get, "ndjson/\(name)")
            for try await line in body.lines {
                lines.append(line)
                first.continuation.yield()
            }
            return lines
        }
        for await _ in first.stream { break }
        return reader
    }

    private func release(_ name: String) async throws {
        let releaser = HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: .ephemeral)
        let _: Data = try await releaser.GET("release/\(name)", serializer: DataResponseSerializer())
    }

    /// A group of `services` that traps no signal and logs nothing.
    private func group(_ services: [any Service]) -> ServiceGroup {
        ServiceGroup(
            services: services, gracefulShutdownSignals: [], cancellationSignals: [],
            logger: Logger(label: "courier-tests-group") { _ in SwiftLogNoOpLogHandler() })
    }

    /// The message of a `sessionInvalidated` error, or nil for any other outcome.
    private func refusal(_ error: (any Error)?) -> String? {
        guard case .sessionInvalidated(let context) = error as? CourierError else { return nil }
        return context.message
    }

    private func shutdownBegan(_ recorder: LogRecorder) async -> Bool {
        let lines = await recorder.lines { lines in
            lines.contains { $0.message == "Courier session shutting down" }
        }
        return lines.contains { $0.message == "Courier session shutting down" }
    }

    @Test func aGracefulShutdownRefusesNewRequestsAndLetsTheRunningOnesFinish() async throws {
        let recorder = LogRecorder()
        let api = try await manager(recorder)
        let name = "service-\(UUID().uuidString.prefix(8))"
        let reader = try await heldStream(api, name)
        let group = group([HTTPSessionService(manager: api, shutdownDeadline: .seconds(300))])
        let running = Task { try await group.run() }
        await group.triggerGracefulShutdown()
        #expect(await shutdownBegan(recorder))

        // Every kind of new work is refused at once, saying why; the held stream goes on.
        let get = await capturedError { _ = try await api.GET("echo", serializer: DataResponseSerializer()) }
        #expect(refusal(get)?.contains("The session is shutting down") == true, "\(String(describing: get))")
        #expect(refusal(get)?.contains("GET echo") == true)
        let stream = await capturedError { _ = try await api.stream(.get, "ndjson/other") }
        #expect(refusal(stream) != nil, "\(String(describing: stream))")
        let webSocket = await capturedError { _ = try await api.webSocket("ws/echo") }
        #expect(
            refusal(webSocket)?.contains("The session is shutting down") == true, "\(String(describing: webSocket))")
        #expect(api.tasks.map(\.kind) == [.stream])

        try await release(name)
        #expect(try await reader.value == [#"{"n": 1}"#, #"{"n": 2}"#])
        try await running.value
        #expect(api.tasks.isEmpty)
        // Refused after the session has ended too.
        let after = await capturedError { _ = try await api.GET("echo", serializer: DataResponseSerializer()) }
        #expect(refusal(after)?.contains("The session is shutting down") == true)
    }

    @Test func requestsStillRunningAtTheShutdownDeadlineAreCancelled() async throws {
        let recorder = LogRecorder()
        let api = try await manager(recorder)
        let name = "service-\(UUID().uuidString.prefix(8))"
        let reader = try await heldStream(api, name)
        let group = group([HTTPSessionService(manager: api, shutdownDeadline: .milliseconds(300))])
        let running = Task { try await group.run() }
        await group.triggerGracefulShutdown()
        await #expect(throws: CancellationError.self) { try await reader.value }
        try await running.value
        #expect(api.tasks.isEmpty)
        #expect(
            recorder.messages.contains(
                "Courier session shutdown deadline passed: cancelling the requests still running"))
        try await release(name)
    }

    @Test func aShutdownWithNothingRunningEndsAtOnce() async throws {
        let recorder = LogRecorder()
        let api = try await manager(recorder)
        let _: Data = try await api.GET("echo", serializer: DataResponseSerializer())
        // A deadline far beyond the suite's time limit: the group's run returns within the
        // limit only if the service ends as soon as nothing runs, not at its deadline.
        let group = group([HTTPSessionService(manager: api, shutdownDeadline: .seconds(86_400))])
        let running = Task { try await group.run() }
        await group.triggerGracefulShutdown()
        try await running.value
        #expect(api.tasks.isEmpty)
        #expect(!recorder.messages.contains { $0.contains("deadline passed") })
        let after = await capturedError { _ = try await api.GET("echo", serializer: DataResponseSerializer()) }
        #expect(refusal(after)?.contains("The session is shutting down") == true)
    }

    @Test func theGroupsCancellationCancelsTheRunningRequestsAtOnce() async throws {
        let recorder = LogRecorder()
        let api = try await manager(recorder)
        let name = "service-\(UUID().uuidString.prefix(8))"
        let reader = try await heldStream(api, name)
        let group = group([HTTPSessionService(manager: api, shutdownDeadline: .seconds(300))])
        let running = Task { try await group.run() }
        #expect(api.tasks.count == 1)
        running.cancel()
        await #expect(throws: CancellationError.self) { try await reader.value }
        _ = try? await running.value
        let after = await capturedError { _ = try await api.GET("echo", serializer: DataResponseSerializer()) }
        #expect(refusal(after)?.contains("its service was cancelled") == true, "\(String(describing: after))")
        try await release(name)
    }

    @Test func aServiceNamesItsManagersBaseURL() async throws {
        let api = HTTPSessionManager(baseURL: URL(string: "https://api.example.com/v1")!, configuration: .ephemeral)
        #expect("\(HTTPSessionService(manager: api))" == "HTTPSessionService(https://api.example.com/v1/)")
        #expect(HTTPSessionService(manager: api).shutdownDeadline == .seconds(10))
    }

    /// The whole path a deployed service takes: `SIGTERM` to the process, the group's graceful
    /// shutdown, the session refusing new requests while the held one finishes, then the
    /// process exits 0 (CourierTestHelper's `service` command, ServiceScenario.swift).
    @Test func aSIGTERMShutsTheSessionDownGracefully() async throws {
        let fault = try await TestServers.fault()
        let name = "service-\(UUID().uuidString.prefix(8))"
        let helper = try HelperProcess(["service", fault.absoluteString, name, "300000"])
        _ = try await helper.line { $0 == "holding" }
        #expect(kill(helper.pid, SIGTERM) == 0)
        let refused = try await helper.line { $0.hasPrefix("refused") || $0 == "accepted" || $0.hasPrefix("failed") }
        #expect(refused.hasPrefix("refused The session is shutting down"), "\(refused)")
        try await release(name)
        let finished = try await helper.line { $0.hasPrefix("finished") || $0 == "cancelled" || $0.hasPrefix("failed") }
        #expect(finished == "finished 2")
        _ = try await helper.line { $0 == "stopped" }
        #expect(await helper.exitStatus() == 0)
    }
}
