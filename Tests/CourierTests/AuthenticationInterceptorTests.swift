import Foundation
import Synchronization
import Testing

@testable import Courier

/// `AuthenticationInterceptor` against the fault server's `/bearer/<name>?token=T`, which
/// answers 401 unless the request carries `Authorization: Bearer T`.
@Suite struct AuthenticationInterceptorTests {
    /// Counts the refreshes and answers each with `token` after `delay`, or throws.
    final class Refresher: Sendable {
        let calls = Atomic<Int>(0)
        let token: String?
        let delay: Duration

        init(token: String?, delay: Duration = .milliseconds(200)) {
            self.token = token
            self.delay = delay
        }

        struct Refused: Error, Equatable {}

        func refresh(_ old: BearerCredential?) async throws -> BearerCredential {
            calls.add(1, ordering: .relaxed)
            try await Task.sleep(for: delay)
            guard let token else { throw Refused() }
            return BearerCredential(accessToken: token, refreshToken: old?.refreshToken)
        }
    }

    static func manager(_ auth: AuthenticationInterceptor) async throws -> HTTPSessionManager {
        try await faultManager { $0.interceptors = [auth] }
    }

    /// Fifty requests at once to `/bearer/<name>?token=fresh`; their results in any order.
    static func fifty(_ api: HTTPSessionManager, _ name: String) async -> [Result<JSON, any Error>] {
        await withTaskGroup(of: Result<JSON, any Error>.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    do {
                        return .success(try await api.GET("bearer/\(name)", parameters: ["token": "fresh"]))
                    } catch {
                        return .failure(error)
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
    }

    static func name(_ prefix: String) -> String { "\(prefix)-\(UUID().uuidString.prefix(8))" }

    /// The refresh timeout of the tests that are not about it: under ThreadSanitizer with the
    /// whole suite running, refreshes have taken longer than the default 30 s.
    static let patientRefresh: Duration = .seconds(600)

    @Test func fiftyRequestsWithAnExpiredTokenShareOneRefresh() async throws {
        let refresher = Refresher(token: "fresh")
        let expired = BearerCredential(
            accessToken: "old", refreshToken: "r1", expiration: Date(timeIntervalSinceNow: -60))
        let auth = AuthenticationInterceptor(
            credential: expired, refreshTimeout: Self.patientRefresh, refresh: refresher.refresh)
        let api = try await Self.manager(auth)
        let name = Self.name("expired")
        let results = await Self.fifty(api, name)
        #expect(results.count == 50)
        for result in results { #expect((try? result.get())?["authenticated"] == true) }
        #expect(refresher.calls.load(ordering: .relaxed) == 1)
        #expect(auth.credential == BearerCredential(accessToken: "fresh", refreshToken: "r1"))
        // Refreshed before sending: the server saw the new token only, once per request.
        let seen = try await HostileServerTests.authorizations(faultManager(), name)
        #expect(seen == Array(repeating: "Bearer fresh", count: 50))
    }

    @Test func fiftyRequestsAnswered401ShareOneRefreshAndAreReplayed() async throws {
        let refresher = Refresher(token: "fresh")
        let auth = AuthenticationInterceptor(
            credential: BearerCredential(accessToken: "revoked"), refreshTimeout: Self.patientRefresh,
            refresh: refresher.refresh)
        let api = try await Self.manager(auth)
        let name = Self.name("revoked")
        let results = await Self.fifty(api, name)
        for result in results { #expect((try? result.get())?["authenticated"] == true) }
        #expect(refresher.calls.load(ordering: .relaxed) == 1)
        let seen = try await HostileServerTests.authorizations(faultManager(), name)
        // Every request that went out with the revoked token went again with the new one.
        let revoked = seen.filter { $0 == "Bearer revoked" }.count
        #expect(revoked >= 1)
        #expect(seen.filter { $0 == "Bearer fresh" }.count == 50)
        #expect(seen.count == 50 + revoked)
    }

    @Test func aFailingRefreshFailsEveryWaitingRequestWithTheSameError() async throws {
        let refresher = Refresher(token: nil)
        let expired = BearerCredential(accessToken: "old", expiration: Date(timeIntervalSinceNow: -60))
        let auth = AuthenticationInterceptor(
            credential: expired, refreshTimeout: Self.patientRefresh, refresh: refresher.refresh)
        let api = try await Self.manager(auth)
        let name = Self.name("failing")
        let results = await Self.fifty(api, name)
        #expect(refresher.calls.load(ordering: .relaxed) == 1)
        var messages: Set<String> = []
        for result in results {
            guard case .failure(let error) = result, case .authenticationFailed(let context)? = error as? CourierError
            else {
                Issue.record("expected authenticationFailed, got \(result)")
                continue
            }
            #expect(context.underlyingError is Refresher.Refused)
            messages.insert(context.message)
        }
        #expect(messages.count == 1)
        // Nothing was sent with the expired token.
        #expect(try await HostileServerTests.authorizations(faultManager(), name).isEmpty)
    }

    @Test func aReplayedRequestAnswered401FailsWithTheStatus() async throws {
        let refresher = Refresher(token: "also-wrong", delay: .zero)
        let auth = AuthenticationInterceptor(
            credential: BearerCredential(accessToken: "wrong"), refreshTimeout: Self.patientRefresh,
            refresh: refresher.refresh)
        let api = try await Self.manager(auth)
        let error = await capturedError {
            let _: JSON = try await api.GET("bearer/\(Self.name("wrong"))", parameters: ["token": "fresh"])
        }
        #expect(isCourierError(error) { $0.response?.status.code == 401 })
        #expect(refresher.calls.load(ordering: .relaxed) == 1)
    }

    @Test func tooManyRefreshesWithinTheWindowAreRefused() async throws {
        let refresher = Refresher(token: "never-accepted", delay: .zero)
        let auth = AuthenticationInterceptor(
            credential: BearerCredential(accessToken: "wrong"), refreshWindow: .seconds(600), maximumRefreshes: 2,
            refreshTimeout: Self.patientRefresh, refresh: refresher.refresh)
        let api = try await Self.manager(auth)
        var errors: [(any Error)?] = []
        for round in 0..<4 {
            errors.append(
                await capturedError {
                    // A token the server takes for this round only: the new one is rejected too.
                    let _: JSON = try await api.GET(
                        "bearer/\(Self.name("loop"))", parameters: ["token": "round-\(round)"])
                })
        }
        #expect(refresher.calls.load(ordering: .relaxed) == 2)
        #expect(isCourierError(errors[0]) { $0.response?.status.code == 401 })
        #expect(isCourierError(errors[1]) { $0.response?.status.code == 401 })
        for error in errors[2...] {
            #expect(
                isCourierError(error) {
                    if case .authenticationFailed(let context) = $0 {
                        context.message.contains("Refused")
                    } else {
                        false
                    }
                })
        }
    }

    // MARK: A refresh that never returns

    /// A refresh that asks the fault server's `/silent`, which never answers.
    static func silentRefresh() async throws -> @Sendable (BearerCredential?) async throws -> BearerCredential {
        let endpoint = try await faultManager()
        return { _ in
            let token: String = try await endpoint.GET("silent", serializer: StringResponseSerializer())
            return BearerCredential(accessToken: token)
        }
    }

    @Test func aRefreshThatNeverReturnsIsCutOffByItsTimeout() async throws {
        let auth = AuthenticationInterceptor(
            credential: nil, refreshTimeout: .milliseconds(500), refresh: try await Self.silentRefresh())
        let api = try await faultManager {
            $0.interceptors = [auth]
            $0.requestTimeout = .seconds(2)
        }
        let name = Self.name("silent-refresh")
        let error = await capturedError { let _: JSON = try await api.GET("bearer/\(name)") }
        guard case .authenticationFailed(let context)? = error as? CourierError else {
            Issue.record("expected authenticationFailed, got \(String(describing: error))")
            return
        }
        // Ended by the refresh's own limit, not by the silent endpoint's 60 s timeout (a
        // timedOut too, with libcurl's words).
        #expect(
            isCourierError(context.underlyingError) {
                if case .timedOut(let timeout) = $0 {
                    timeout.message.contains("refresh took longer than")
                } else {
                    false
                }
            })
        // The next request starts a refresh of its own rather than waiting on the dead one.
        let again = await capturedError { let _: JSON = try await api.GET("bearer/\(name)") }
        #expect(isCourierError(again) { if case .authenticationFailed = $0 { true } else { false } })
        #expect(try await RetryTests.stats(name)["requests"] == 0)
    }

    @Test func cancellingARequestEndsItsWaitForARefresh() async throws {
        let auth = AuthenticationInterceptor(credential: nil, refresh: try await Self.silentRefresh())
        let api = try await Self.manager(auth)
        let name = Self.name("cancelled-refresh")
        let request = Task { () -> JSON in try await api.GET("bearer/\(name)") }
        try await Task.sleep(for: .milliseconds(300))
        request.cancel()
        // Before, the request waited for the refresh to end (the silent endpoint's timeout,
        // 60 s) and failed with authenticationFailed.
        let error = await capturedError { _ = try await request.value }
        #expect(error is CancellationError, "\(String(describing: error))")
    }
}
