@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Logging
import Testing

@testable import Courier

/// Event monitors, the logging monitor and curl descriptions, against httpbin and the fault
/// server. The order of a request's events in each case (retried, cached, revalidated,
/// challenged) is tested on the stub: CourierPipelineTests' `EventOrderTests`.
@Suite struct EventMonitorTests {
    /// Keeps every event it is given.
    final class Recorder: EventMonitor {
        let events = Locked<[RequestEvent]>([])

        func handle(_ event: RequestEvent) async {
            events.withLock { $0.append(event) }
        }

        /// The events' names once `count` have arrived (waits up to 10 s).
        func names(waitingFor count: Int) async -> [String] {
            // Long enough for a suite slowed by ThreadSanitizer (10 s was not); it returns as
            // soon as the events are in.
            let deadline = ContinuousClock.now + .seconds(120)
            while events.withLock({ $0.count }) < count, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
            return events.withLock { $0.map(\.name) }
        }
    }

    @Test func aRequestsLifecycleWithARedirectAgainstHttpbin() async throws {
        let recorder = Recorder()
        let api = try await httpbinManager { $0.eventMonitors = [recorder] }
        let response = try await api.request(.get, "redirect/1", serializer: JSONResponseSerializer())
        #expect(response.status == .ok)
        let names = await recorder.names(waitingFor: 7)
        #expect(
            names == ["created", "adapted", "attemptStarted", "responseHead", "redirected", "responseHead", "finished"])
        let events = recorder.events.withLock { $0 }
        #expect(Set(events.map(\.requestID)).count == 1)
        if case .redirected(let from, let to, let redirect) = events[4].kind {
            #expect(from.path == "/redirect/1")
            #expect(to.path == "/get")
            #expect(redirect.status == .found)
        } else {
            Issue.record("expected a redirect event, got \(events[4].kind)")
        }
        if case .finished(let request, let response, let metrics, let source) = events[6].kind {
            #expect(request.path == "/get")
            #expect(response.status == .ok)
            #expect(metrics.redirectCount == 1)
            #expect(source == .network)
        } else {
            Issue.record("expected a finished event, got \(events[6].kind)")
        }
    }

    @Test func severalMonitorsEachGetEveryEvent() async throws {
        let first = Recorder()
        let second = Recorder()
        let api = try await httpbinManager { $0.eventMonitors = [first, second] }
        for _ in 0..<3 { let _: JSON = try await api.GET("get") }
        #expect(await first.names(waitingFor: 15).filter { $0 == "finished" }.count == 3)
        #expect(await second.names(waitingFor: 15) == first.names(waitingFor: 15))
    }

    @Test(.timeLimit(.minutes(5))) func aSlowMonitorDelaysNoRequest() async throws {
        // A monitor that handles nothing until the test lets it: 20 requests still finish, and
        // the monitor catches up afterwards. (How little a slow monitor costs is measured in
        // Documentation/Benchmarks.md; here it is only that nothing waits for it.)
        final class Blocked: EventMonitor, Sendable {
            let gate = Locked(false)
            let handled = Locked(0)
            func handle(_ event: RequestEvent) async {
                // Held until the gate opens (5 minutes at most, so a failing test still ends).
                for _ in 0..<30_000 where !gate.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(10)) }
                handled.withLock { $0 += 1 }
            }
        }
        let monitor = Blocked()
        let api = try await httpbinManager { $0.eventMonitors = [monitor] }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 { group.addTask { let _: JSON = try await api.GET("get") } }
            try await group.waitForAll()
        }
        // Every request has its answer while the monitor has handled no event of them.
        #expect(monitor.handled.withLock { $0 } == 0)
        monitor.gate.withLock { $0 = true }
        let deadline = ContinuousClock.now + .seconds(60)
        while monitor.handled.withLock({ $0 }) < 100, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(monitor.handled.withLock { $0 } == 100)
    }

    @Test func debugLoggingWritesOneLinePerRequestWithSecretsRedacted() async throws {
        let recorder = LogRecorder()
        var logger = recorder.logger
        logger.logLevel = .trace
        let api = HTTPSessionManager(
            baseURL: try await TestServers.httpbin(), configuration: .ephemeral, logger: logger)
        let headers = ["Authorization": "Bearer top-secret-token", "Cookie": "session=cookie-secret"]
        let _: JSON = try await api.GET("response-headers", parameters: ["Set-Cookie": "id=xyzzy"], headers: headers)
        let lines = await recorder.lines(waitingFor: { $0.contains { $0.level == .debug } })
        let debug = lines.filter { $0.level == .debug }.map(\.message)
        #expect(debug.count == 1)
        let line = try #require(debug.first)
        #expect(line.hasPrefix("GET http://127.0.0.1:"))
        #expect(line.contains("/response-headers?Set-Cookie=id%3Dxyzzy -> 200 in "))
        #expect(line.contains(" ms, ") && line.hasSuffix(" bytes"))
        let trace = lines.filter { $0.level == .trace }.map(\.message).joined(separator: "\n")
        #expect(trace.contains("> Authorization: <redacted>"))
        #expect(trace.contains("> Cookie: <redacted>"))
        #expect(trace.contains("< Set-Cookie: <redacted>"))
        #expect(trace.contains("< Content-Type: application/json"))
        let everything = lines.map(\.message).joined(separator: "\n")
        #expect(!everything.contains("top-secret-token"))
        #expect(!everything.contains("cookie-secret"))
        #expect(!everything.contains("id=xyzzy"))
    }

    @Test func aRequestsLogLineIsWrittenBeforeItsCallReturns() async throws {
        let recorder = LogRecorder()
        var logger = recorder.logger
        logger.logLevel = .debug
        let api = HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: .ephemeral, logger: logger)
        for index in 0..<20 {
            let _: JSON = try await api.GET("echo", parameters: ["i": .int(index)])
            // The app's own next line comes after the request's.
            logger.debug("app \(index)")
            let error = await capturedError { let _: JSON = try await api.GET("status/404") }
            #expect(error != nil)
            logger.debug("app failed \(index)")
        }
        let messages = recorder.messages
        #expect(messages.count == 80)
        for index in 0..<20 {
            let lines = Array(messages[(index * 4)..<(index * 4 + 4)])
            #expect(lines[0].contains("/echo?i=\(index) -> 200"), "\(lines)")
            #expect(lines[1] == "app \(index)")
            #expect(lines[2].contains("/status/404 failed"), "\(lines)")
            #expect(lines[3] == "app failed \(index)")
        }
    }

    @Test func aLoggerAboveDebugGetsNoMonitor() async throws {
        let recorder = LogRecorder()
        var logger = recorder.logger
        logger.logLevel = .info
        let api = HTTPSessionManager(
            baseURL: try await TestServers.httpbin(), configuration: .ephemeral, logger: logger)
        let _: JSON = try await api.GET("get")
        #expect(api.pipeline.monitors == nil)
        #expect(recorder.messages.isEmpty)
    }

    @Test func theCurlDescriptionRunsAndSendsTheSameRequest() async throws {
        let base = try await TestServers.httpbin()
        let api = HTTPSessionManager(baseURL: base, configuration: .ephemeral)
        api.requestSerializer = JSONRequestSerializer()
        let sent = try await api.request(
            .post, "anything/it's", options: RequestOptions(), serializer: JSONResponseSerializer())
        var request = sent.request
        request.headerFields[.authorization] = "Bearer s3cret"
        request.headerFields[.contentType] = "application/json"
        let body = Data(#"{"quote": "it's"}"#.utf8)
        #expect(request.cURLDescription(body: body).contains("-H 'Authorization: <redacted>'"))
        #expect(!request.cURLDescription(body: body).contains("s3cret"))

        let command = request.cURLDescription(body: body, revealingSecrets: true)
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command + " --silent"]
        // The system's curl with the system's libcurl, whichever libcurl this process runs on.
        process.environment = ProcessInfo.processInfo.environment.filter { $0.key != "LD_LIBRARY_PATH" }
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let echoed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let echo = try JSON(parsing: echoed)
        #expect(echo["method"].stringValue == "POST")
        #expect(echo["url"].stringValue?.hasSuffix("/anything/it's") == true)
        #expect(echo["headers"]["Authorization"].stringValue == "Bearer s3cret")
        #expect(echo["headers"]["User-Agent"].stringValue == request.headerFields[.userAgent])
        #expect(echo["data"].stringValue == #"{"quote": "it's"}"#)
    }

    @Test func aRequestsOwnMonitorHearsOnlyOfIt() async throws {
        let session = Recorder()
        let own = Recorder()
        let api = try await httpbinManager { $0.eventMonitors = [session] }
        // Its own call (redirected once) among others on the same session, at the same time.
        async let others: [JSON] = withThrowingTaskGroup(of: JSON.self) { group in
            for _ in 0..<4 { group.addTask { try await api.GET("get") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let response = try await api.request(
            .get, "redirect/1", options: RequestOptions(eventMonitors: [own]), serializer: JSONResponseSerializer())
        #expect(response.status == .ok)
        #expect(try await others.count == 4)
        let names = await own.names(waitingFor: 7)
        #expect(
            names == ["created", "adapted", "attemptStarted", "responseHead", "redirected", "responseHead", "finished"])
        let ownEvents = own.events.withLock { $0 }
        let id = try #require(ownEvents.first?.requestID)
        #expect(ownEvents.allSatisfy { $0.requestID == id })
        // The session's monitors heard of every call, this one's events included.
        #expect(await session.names(waitingFor: 7 + 4 * 5).filter { $0 == "finished" }.count == 5)
        #expect(session.events.withLock { $0.filter { $0.requestID == id }.map(\.name) } == names)
    }

    @Test func aRequestsOwnMonitorHearsOfItsFailure() async throws {
        let own = Recorder()
        let api = try await faultManager()
        await #expect(throws: CourierError.self) {
            let _: Data = try await api.GET(
                "status/404", options: RequestOptions(eventMonitors: [own]), serializer: DataResponseSerializer())
        }
        #expect(await own.names(waitingFor: 5).last == "failed")
    }
}
