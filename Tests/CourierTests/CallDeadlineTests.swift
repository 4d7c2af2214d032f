@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Testing

@testable import Courier
@testable import CourierEngine

/// A call's resource timeout is the whole call's, as URLSession's is: waiting for a place
/// under `maximumConcurrentTasks`, for interceptors (a token refresh), for a credential, for a
/// retry's delay and for every transfer. Each test holds the thing waited for longer than the
/// call may take (a place held until the test releases it, a refresh that never returns, a
/// `Retry-After` of an hour), so a call that ends at all ended by its deadline; what it says
/// is what it waited for. (Waiting for a route is tested in a network namespace of its own:
/// ReachabilityTests.)
@Suite(.timeLimit(.minutes(10))) struct CallDeadlineTests {
    /// A session that runs one transfer at a time, the place taken by a request that the fault
    /// server holds until `/release/<name>`; `body` runs while it is held.
    private func whileAPlaceIsHeld(
        _ body: (HTTPSessionManager, EngineGroup) async throws -> Void
    ) async throws {
        let api = try await faultManager { $0.maximumConcurrentTasks = 1 }
        let group = try EngineGroupTests.group(api)
        let name = "held-\(UUID().uuidString.prefix(8))"
        // The place is held until the test releases it, or for the 60 seconds the fault server
        // holds a stream at most: not cut short by the client's own 60-second request timeout.
        // A run slower than that (seen once on a machine at load 10) still fails here.
        let holding = RequestOptions(requestTimeout: .seconds(900))
        let holder = Task {
            try await api.GET("ndjson/\(name)", options: holding, serializer: DataResponseSerializer())
        }
        while group.admission?.counts.running != 1 { try await Task.sleep(for: .milliseconds(10)) }
        do {
            try await body(api, group)
        } catch {
            try await release(name)
            throw error
        }
        try await release(name)
        #expect(try await holder.value == Data("{\"n\": 1}\n{\"n\": 2}\n".utf8))
    }

    private func release(_ name: String) async throws {
        let releaser = HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: .ephemeral)
        let _: Data = try await releaser.GET("release/\(name)", serializer: DataResponseSerializer())
    }

    private func timedOutMessage(_ error: (any Error)?) -> String? {
        guard case .timedOut(let context) = error as? CourierError else { return nil }
        return context.message
    }

    @Test func aCallWaitingForAPlaceEndsAtItsResourceTimeout() async throws {
        try await whileAPlaceIsHeld { api, group in
            let error = await capturedError {
                _ = try await api.GET(
                    "bytes", parameters: ["n": 10], options: RequestOptions(resourceTimeout: .seconds(3)),
                    serializer: DataResponseSerializer())
            }
            let message = try #require(timedOutMessage(error), "\(String(describing: error))")
            #expect(message.contains("waited for a place"))
            #expect(message.contains("maximumConcurrentTasks"))
            // It left the queue: nothing waits behind the held place.
            #expect(group.admission?.counts.waiting == 0)
        }
    }

    @Test func theSessionsResourceTimeoutCountsTheWaitForAPlaceToo() async throws {
        let api = try await faultManager {
            $0.maximumConcurrentTasks = 1
            $0.resourceTimeout = .seconds(3)
        }
        let group = try EngineGroupTests.group(api)
        let name = "held-\(UUID().uuidString.prefix(8))"
        // The holder has time of its own (the fault server lets it go after 60 s at most, so a
        // run that stalls still ends with the whole body); the queued call, the session's 3 s.
        let holding = RequestOptions(requestTimeout: .seconds(900), resourceTimeout: .seconds(900))
        let holder = Task {
            try await api.GET("ndjson/\(name)", options: holding, serializer: DataResponseSerializer())
        }
        while group.admission?.counts.running != 1 { try await Task.sleep(for: .milliseconds(10)) }
        let queued = await capturedError {
            _ = try await api.GET("bytes", parameters: ["n": 10], serializer: DataResponseSerializer())
        }
        let message = timedOutMessage(queued)
        try await release(name)
        #expect(message?.contains("waited for a place") == true, "\(String(describing: queued))")
        #expect(try await holder.value == Data("{\"n\": 1}\n{\"n\": 2}\n".utf8))
    }

    @Test func aCancelledCallWaitingForAPlaceLetsGoOfItAtOnce() async throws {
        try await whileAPlaceIsHeld { api, group in
            let body = UploadBody.data(Data(repeating: 7, count: 256 << 10))
            let uploads = (0..<50).map { _ in
                Task {
                    try await api.send(
                        HTTPRequest(method: .post, url: api.baseURL!.appending(path: "echo")), body: body)
                }
            }
            while group.admission?.counts.waiting != 50 { try await Task.sleep(for: .milliseconds(10)) }
            for upload in uploads { upload.cancel() }
            for upload in uploads {
                let error = await capturedError { _ = try await upload.value }
                #expect(error is CancellationError)
            }
            // Off the queue while the place is still held: their bodies are not kept until it
            // frees.
            var waiting = group.admission?.counts.waiting
            for _ in 0..<500 where waiting != 0 {
                try await Task.sleep(for: .milliseconds(10))
                waiting = group.admission?.counts.waiting
            }
            #expect(waiting == 0)
            #expect(group.admission?.counts.running == 1)
        }
    }

    @Test func aTokenRefreshThatNeverReturnsEndsAtTheResourceTimeout() async throws {
        let authenticator = AuthenticationInterceptor(credential: nil, refreshTimeout: .seconds(3600)) { _ in
            // Never returns, and ignores cancellation.
            await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }
            return BearerCredential(accessToken: "never")
        }
        let api = try await faultManager { $0.interceptors = [authenticator] }
        let error = await capturedError {
            _ = try await api.GET(
                "bearer/never-\(UUID().uuidString.prefix(8))",
                options: RequestOptions(requestTimeout: .seconds(2), resourceTimeout: .milliseconds(500)),
                serializer: DataResponseSerializer())
        }
        let message = try #require(timedOutMessage(error), "\(String(describing: error))")
        #expect(message.contains("interceptors"))
    }

    @Test func aRetryWhoseDelayPassesTheResourceTimeoutEndsAtOnce() async throws {
        let api = try await faultManager()
        let name = "flaky-deadline-\(UUID().uuidString.prefix(8))"
        let policy = RetryPolicy(maximumDelay: .seconds(3600), deadline: nil, maximumRetryAfter: .seconds(3600))
        let error = await capturedError {
            _ = try await api.GET(
                "flaky/\(name)", parameters: ["retry-after": "3600"],
                options: RequestOptions(retryPolicy: policy, resourceTimeout: .seconds(600)),
                serializer: DataResponseSerializer())
        }
        let message = try #require(timedOutMessage(error), "\(String(describing: error))")
        #expect(message.contains("to try again"))
        #expect(message.contains("503"))
        // The failed attempt's response stays with the error.
        #expect((error as? CourierError)?.context.metrics?.transactions.count == 1)
    }

    @Test func aCredentialHandlerThatNeverAnswersEndsAtTheResourceTimeout() async throws {
        let api = try await faultManager()
        api.challengeHandler = { _ in
            await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }
            return nil
        }
        // Two seconds: time for the 401 to arrive first on a loaded machine (at 500 ms, the
        // parallel suite once spent it all on the connection).
        let error = await capturedError {
            _ = try await api.GET(
                "private/handler-\(UUID().uuidString.prefix(8))",
                options: RequestOptions(resourceTimeout: .seconds(2)), serializer: DataResponseSerializer())
        }
        let message = try #require(timedOutMessage(error), "\(String(describing: error))")
        #expect(message.contains("credential"))
    }

    @Test func interceptorsSeeTheCallsDeadline() async throws {
        let seen = Locked<ContinuousClock.Instant?>(nil)
        let spy = Interceptor(adapt: { request, context in
            seen.withLock { $0 = context.deadline }
            return request
        })
        let api = try await faultManager { $0.interceptors = [spy] }
        let before = ContinuousClock.now
        _ = try await api.GET(
            "bytes", parameters: ["n": 1], options: RequestOptions(resourceTimeout: .seconds(60)),
            serializer: DataResponseSerializer())
        let deadline = try #require(seen.withLock { $0 })
        #expect(deadline >= before + .seconds(60))
        #expect(deadline <= ContinuousClock.now + .seconds(60))
    }

    // MARK: The caller's deadline (RequestOptions.deadline)

    @Test func aCallersDeadlineBeforeTheResourceTimeoutEndsARetrysWait() async throws {
        let api = try await faultManager()
        let name = "deadline-retry-\(UUID().uuidString.prefix(8))"
        let policy = RetryPolicy(maximumDelay: .seconds(3600), deadline: nil, maximumRetryAfter: .seconds(3600))
        var options = RequestOptions(retryPolicy: policy, resourceTimeout: .seconds(600))
        options.deadline = .now + .seconds(60)
        let error = await capturedError {
            _ = try await api.GET(
                "flaky/\(name)", parameters: ["retry-after": "120"], options: options,
                serializer: DataResponseSerializer())
        }
        // The resource timeout would have let it wait 120 s; the deadline does not.
        let message = try #require(timedOutMessage(error), "\(String(describing: error))")
        #expect(message.contains("deadline"))
        #expect(message.contains("to try again"))
        #expect(try await RetryTests.stats(name)["requests"] == 1)
    }

    @Test func aDeadlineAlreadyPastSendsNothing() async throws {
        let api = try await faultManager()
        let name = "deadline-past-\(UUID().uuidString.prefix(8))"
        let error = await capturedError {
            _ = try await api.GET(
                "flaky/\(name)", options: RequestOptions(deadline: .now - .seconds(1)),
                serializer: DataResponseSerializer())
        }
        let message = try #require(timedOutMessage(error), "\(String(describing: error))")
        #expect(message.contains("deadline"))
        #expect(try await RetryTests.stats(name)["requests"] == 0)
    }

    @Test func aTransferEndsAtTheCallersDeadline() async throws {
        let api = try await faultManager()
        // A body dripped over about 5 s, with a deadline 1 s away and no resource timeout.
        let error = await capturedError {
            _ = try await api.GET(
                "drip", parameters: ["n": 10, "delay": 500], options: RequestOptions(deadline: .now + .seconds(1)),
                serializer: DataResponseSerializer())
        }
        guard case .timedOut = error as? CourierError else {
            Issue.record("expected timedOut, got \(String(describing: error))")
            return
        }
    }

    @Test func interceptorsSeeTheCallersDeadlineWhenItComesFirst() async throws {
        let seen = Locked<ContinuousClock.Instant?>(nil)
        let spy = Interceptor(adapt: { request, context in
            seen.withLock { $0 = context.deadline }
            return request
        })
        let api = try await faultManager {
            $0.interceptors = [spy]
            $0.resourceTimeout = .seconds(600)
        }
        let deadline = ContinuousClock.now + .seconds(60)
        _ = try await api.GET(
            "bytes", parameters: ["n": 1], options: RequestOptions(deadline: deadline),
            serializer: DataResponseSerializer())
        #expect(seen.withLock { $0 } == deadline)
        // A later deadline leaves the resource timeout in charge.
        _ = try await api.GET(
            "bytes", parameters: ["n": 1], options: RequestOptions(deadline: .now + .seconds(6_000)),
            serializer: DataResponseSerializer())
        #expect(try #require(seen.withLock { $0 }) <= ContinuousClock.now + .seconds(600))
    }
}
