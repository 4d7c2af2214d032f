@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes

/// A bearer credential: an access token, and what its refresh needs.
public struct BearerCredential: Sendable, Hashable {
    /// Sent as `Authorization: Bearer <accessToken>`.
    public var accessToken: String
    /// For your refresh function; Courier never sends it.
    public var refreshToken: String?
    /// When the access token stops working, if known.
    public var expiration: Date?

    /// A credential.
    public init(accessToken: String, refreshToken: String? = nil, expiration: Date? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiration = expiration
    }

    /// Whether the token expires within `margin` from now (false when its expiration is
    /// unknown: a 401 then tells).
    public func expires(within margin: Duration) -> Bool {
        guard let expiration else { return false }
        return expiration.timeIntervalSinceNow <= Double(margin.components.seconds)
    }
}

/// Authenticates requests with a bearer token and refreshes it, once for everyone waiting.
///
/// ```swift
/// let auth = AuthenticationInterceptor(credential: saved) { old in
///     try await tokenService.refresh(old?.refreshToken)   // your call; returns a new credential
/// }
/// configuration.interceptors = [auth, RetryPolicy()]
/// ```
///
/// - Every attempt gets `Authorization: Bearer <token>` of the current credential.
/// - A credential that expires within ``refreshMargin`` (or none at all) is refreshed before
///   the request is sent.
/// - A request answered 401 (a response that failed validation with that status) while
///   carrying the current token refreshes the credential and is sent again, once; one that
///   carried an older token (refreshed meanwhile) is sent again with the new one.
/// - One refresh runs at a time: every request that needs it waits for the same one. If it
///   fails, they all fail with the same `CourierError.authenticationFailed(_:)`, whose
///   `underlyingError` is what the refresh threw.
/// - More than ``maximumRefreshes`` refreshes within ``refreshWindow`` are refused with
///   `CourierError.authenticationFailed(_:)` (a server that rejects every new token would
///   otherwise loop).
/// - A refresh that takes longer than ``refreshTimeout`` is cancelled and fails its waiters
///   with `CourierError.authenticationFailed(_:)` (its `underlyingError` a `timedOut`); the
///   next request that needs a credential starts a new one. A waiting request whose task is
///   cancelled stops waiting at once (with `CancellationError`), whatever the refresh does.
public final class AuthenticationInterceptor: RequestInterceptor {
    /// Refresh a credential that expires this soon.
    public let refreshMargin: Duration
    /// The longest a refresh may take.
    public let refreshTimeout: Duration
    /// The window in which at most ``maximumRefreshes`` refreshes may happen.
    public let refreshWindow: Duration
    /// The most refreshes within ``refreshWindow``.
    public let maximumRefreshes: Int
    private let refresh: @Sendable (BearerCredential?) async throws -> BearerCredential
    private let state: Locked<State>

    private struct State {
        var credential: BearerCredential?
        var refreshing: Task<BearerCredential, any Error>?
        var refreshTimes: [ContinuousClock.Instant] = []
        /// Requests already sent again after a 401, so that a second 401 fails them.
        var replayed: Set<UInt64> = []
        /// Requests whose replay waited for a refresh that failed: their next `adapt` throws it.
        var failedReplays: [UInt64: any Error] = [:]
    }

    /// An interceptor that starts with `credential` (nil: refresh before the first request)
    /// and gets new ones from `refresh`, which is given the current credential.
    public init(
        credential: BearerCredential?, refreshMargin: Duration = .seconds(30), refreshWindow: Duration = .seconds(30),
        maximumRefreshes: Int = 5, refreshTimeout: Duration = .seconds(30),
        refresh: @escaping @Sendable (BearerCredential?) async throws -> BearerCredential
    ) {
        self.refreshMargin = refreshMargin
        self.refreshTimeout = refreshTimeout
        self.refreshWindow = refreshWindow
        self.maximumRefreshes = maximumRefreshes
        self.refresh = refresh
        self.state = Locked(State(credential: credential))
    }

    /// The current credential (for example to save it).
    public var credential: BearerCredential? { state.withLock { $0.credential } }

    /// Sets `Authorization`, after a refresh when the credential is missing or about to expire.
    public func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
        let (current, failure) = state.withLock { state in
            (state.credential, context.attempt > 1 ? state.failedReplays.removeValue(forKey: context.requestID) : nil)
        }
        if let failure { throw failure }
        var credential = current
        if credential == nil || credential!.expires(within: refreshMargin) {
            credential = try await refreshed(replacing: credential?.accessToken)
        }
        var request = request
        request.headerFields[.authorization] = "Bearer \(credential!.accessToken)"
        return request
    }

    /// Sends a request answered 401 again, with a refreshed credential.
    public func retry(_ request: HTTPRequest, dueTo error: any Error, context: RequestContext) async -> RetryDecision {
        guard let error = error as? CourierError, error.response?.status.code == 401,
            let sent = request.headerFields[.authorization], sent.hasPrefix("Bearer ")
        else { return .doNotRetry }
        let firstReplay = state.withLock { state in
            if state.replayed.count > 10_000 { state.replayed.removeAll() }
            return state.replayed.insert(context.requestID).inserted
        }
        guard firstReplay else { return .doNotRetry }
        do {
            _ = try await refreshed(replacing: String(sent.dropFirst("Bearer ".count)))
        } catch {
            // The next attempt fails with the refresh's error, as every request waiting on
            // that refresh does.
            state.withLock { $0.failedReplays[context.requestID] = error }
        }
        return .retry
    }

    /// The credential after the refresh that replaces `stale`: the one in flight, a new one,
    /// or the current one if it already differs from `stale`.
    private func refreshed(replacing stale: String?) async throws -> BearerCredential {
        enum Next {
            case current(BearerCredential)
            case wait(Task<BearerCredential, any Error>)
            case refused
        }
        let next = state.withLock { state -> Next in
            if let refreshing = state.refreshing { return .wait(refreshing) }
            if let current = state.credential, current.accessToken != stale, !current.expires(within: refreshMargin) {
                return .current(current)
            }
            let now = ContinuousClock.now
            state.refreshTimes.removeAll { $0 < now - refreshWindow }
            guard state.refreshTimes.count < maximumRefreshes else { return .refused }
            state.refreshTimes.append(now)
            let old = state.credential
            let task = Task { [refresh, refreshTimeout] in
                // The refresh runs on its own, so that one that never returns (or ignores its
                // cancellation) cannot hold this task, nor the waiters, past the timeout.
                let work = Task { try await refresh(old) }
                let outcome: Result<BearerCredential, any Error>
                do {
                    outcome = .success(
                        try await DetachedWait.value(of: work, timeout: refreshTimeout) {
                            CourierError.timedOut(
                                .init(message: "The bearer credential's refresh took longer than \(refreshTimeout)"))
                        })
                } catch {
                    work.cancel()
                    outcome = .failure(
                        CourierError.authenticationFailed(
                            .init(message: "Refreshing the bearer credential failed: \(error)", underlyingError: error))
                    )
                }
                self.state.withLock { state in
                    if case .success(let credential) = outcome { state.credential = credential }
                    state.refreshing = nil
                }
                return try outcome.get()
            }
            state.refreshing = task
            return .wait(task)
        }
        switch next {
        case .current(let credential):
            return credential
        case .wait(let task):
            // Ends with the caller's cancellation too; the refresh goes on for the others.
            return try await DetachedWait.value(of: task)
        case .refused:
            throw CourierError.authenticationFailed(
                .init(
                    message:
                        "Refused to refresh the bearer credential: \(maximumRefreshes) refreshes within \(refreshWindow) already"
                ))
        }
    }
}
