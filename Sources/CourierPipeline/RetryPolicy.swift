@_spi(CourierInternals) import CourierCore
import CourierStorage
import Foundation
import HTTPTypes

/// Retries failed requests with exponential backoff, as an interceptor. Off unless you add it:
///
/// ```swift
/// var configuration = HTTPSessionConfiguration.default
/// configuration.interceptors = [RetryPolicy()]  // or RetryPolicy(maximumAttempts: 5, ...)
/// ```
///
/// A failed attempt is tried again when all of these hold:
/// - the method is one of ``retryableMethods`` (the idempotent ones by default: a `POST` is
///   never sent twice unless you say so);
/// - the failure is one of ``retryableFailures`` (cannot connect, timed out, connection lost),
///   or the response's status is one of ``retryableStatusCodes`` (408, 429, 500, 502, 503, 504;
///   a status fails a request when the response serializer's validation refuses it, which the
///   default serializers do for anything outside 200..<300);
/// - fewer than ``maximumAttempts`` attempts were made, and the next one would start before
///   ``deadline`` has passed since the first;
/// - the ``budget`` (shared by every request that uses this policy) has tokens to spare.
///
/// The wait before attempt *n* + 1 is a random duration between zero and
/// `min(maximumDelay, initialDelay × multiplier^(n − 1))` ("full jitter"), unless the response
/// carries `Retry-After` (seconds, or an HTTP date): that wait is honoured, up to
/// ``maximumRetryAfter``.
///
/// Request bodies from data and files are sent again; a request whose body is a stream is
/// never retried, and neither is a cancelled one. A download that fails part way continues
/// from the bytes on disk with `Range` and `If-Range`. Monitors see every decision as
/// ``RequestEvent/Kind/retryDecided(attempt:error:decision:)``, with its delay and the error.
public struct RetryPolicy: RequestInterceptor {
    /// Transport failures a policy may retry.
    ///
    /// Minor releases may add cases: a `switch` over it ends with `default`.
    public enum Failure: Sendable, Hashable, CaseIterable {
        /// No connection could be made (`CourierError.cannotConnect(_:)`).
        case cannotConnect
        /// The connection or the transfer timed out (`CourierError.timedOut(_:)`).
        case timedOut
        /// The connection closed or reset before the response was complete
        /// (`CourierError.connectionLost(_:)`).
        case connectionLost
        /// The host name did not resolve (`CourierError.cannotResolveHost(_:)`); not retried
        /// by default.
        case cannotResolveHost
    }

    /// The most attempts for one request, the first included (1 never retries).
    public var maximumAttempts: Int
    /// The largest wait before the second attempt; each later one may wait `multiplier` times
    /// longer, up to ``maximumDelay``.
    public var initialDelay: Duration
    /// How much the largest wait grows from one attempt to the next.
    public var multiplier: Double
    /// The cap on the backoff wait.
    public var maximumDelay: Duration
    /// No attempt starts later than this after the first one started (nil: no deadline).
    public var deadline: Duration?
    /// Methods that may be sent again.
    public var retryableMethods: Set<HTTPRequest.Method>
    /// Statuses that are retried (when they fail the request).
    public var retryableStatusCodes: Set<Int>
    /// Transport failures that are retried.
    public var retryableFailures: Set<Failure>
    /// The longest `Retry-After` wait honoured: a longer one waits this long.
    public var maximumRetryAfter: Duration
    /// The token bucket that limits retries across requests (nil: no limit). Copies of a
    /// policy share one budget.
    public var budget: RetryBudget?

    /// The methods RFC 9110 calls idempotent.
    public static let idempotentMethods: Set<HTTPRequest.Method> = [.get, .head, .put, .delete, .options, .trace]
    /// 408, 429, 500, 502, 503 and 504.
    public static let transientStatusCodes: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// A policy; the defaults retry idempotent requests twice (three attempts), waiting up to
    /// 0.5 s and then 1 s, within 30 s, under a shared budget.
    public init(
        maximumAttempts: Int = 3, initialDelay: Duration = .milliseconds(500), multiplier: Double = 2,
        maximumDelay: Duration = .seconds(10), deadline: Duration? = .seconds(30),
        retryableMethods: Set<HTTPRequest.Method> = RetryPolicy.idempotentMethods,
        retryableStatusCodes: Set<Int> = RetryPolicy.transientStatusCodes,
        retryableFailures: Set<Failure> = [.cannotConnect, .timedOut, .connectionLost],
        maximumRetryAfter: Duration = .seconds(60), budget: RetryBudget? = RetryBudget()
    ) {
        self.maximumAttempts = maximumAttempts
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maximumDelay = maximumDelay
        self.deadline = deadline
        self.retryableMethods = retryableMethods
        self.retryableStatusCodes = retryableStatusCodes
        self.retryableFailures = retryableFailures
        self.maximumRetryAfter = maximumRetryAfter
        self.budget = budget
    }

    /// Leaves the request unchanged; a first attempt adds to the budget.
    public func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
        if context.attempt == 1 { budget?.deposit() }
        return request
    }

    /// Decides as the type's description says.
    public func retry(_ request: HTTPRequest, dueTo error: any Error, context: RequestContext) async -> RetryDecision {
        guard context.attempt < maximumAttempts, retryableMethods.contains(request.method),
            let error = error as? CourierError
        else { return .doNotRetry }
        let delay: Duration
        if let response = error.response, retryableStatusCodes.contains(response.status.code) {
            delay = retryAfter(in: response) ?? backoff(after: context.attempt)
        } else if let failure = Self.failure(of: error), retryableFailures.contains(failure) {
            delay = backoff(after: context.attempt)
        } else {
            return .doNotRetry
        }
        if let deadline, context.firstAttemptStarted.advanced(by: deadline) < .now.advanced(by: delay) {
            return .doNotRetry
        }
        guard budget?.withdraw() ?? true else { return .doNotRetry }
        return delay == .zero ? .retry : .retryAfter(delay)
    }

    /// A full-jitter wait after attempt `attempt` failed.
    func backoff(after attempt: Int) -> Duration {
        let ceiling = min(
            Double(maximumDelay.attoseconds),
            Double(initialDelay.attoseconds) * pow(multiplier, Double(max(0, attempt - 1))))
        guard ceiling > 0 else { return .zero }
        return Duration(attoseconds: Int128(Double.random(in: 0...ceiling)))
    }

    /// The wait a `Retry-After` field asks for (RFC 9110 section 10.2.3), capped; nil when there
    /// is none or it cannot be read.
    func retryAfter(in response: HTTPResponse?) -> Duration? {
        guard let value = response?.headerFields[.retryAfter]?.trimmingCharacters(in: .whitespaces) else {
            return nil
        }
        let wait: Duration
        if let seconds = Int(value), seconds >= 0 {
            wait = .seconds(seconds)
        } else if let date = HTTPDate.parse(value) {
            wait = .milliseconds(max(0, Int(date.timeIntervalSinceNow * 1000)))
        } else {
            return nil
        }
        return min(wait, maximumRetryAfter)
    }

    static func failure(of error: CourierError) -> Failure? {
        switch error {
        case .cannotConnect: .cannotConnect
        case .timedOut: .timedOut
        case .connectionLost: .connectionLost
        case .cannotResolveHost: .cannotResolveHost
        default: nil
        }
    }
}

/// A token bucket that stops retries when most requests fail, so that a struggling server is
/// not sent a storm of them (the scheme gRPC's retry throttling uses).
///
/// The bucket holds up to ``maximumTokens`` and starts full. Every request adds
/// ``tokensPerRequest``; every retry takes one token, and is allowed only while more than half
/// of the maximum remains. With the defaults, a healthy client may retry about one request in
/// ten over time; when all requests fail, retries stop after a few.
public final class RetryBudget: Sendable {
    /// The bucket's size.
    public let maximumTokens: Double
    /// What each request adds.
    public let tokensPerRequest: Double
    private let tokens: Locked<Double>

    /// A bucket of `maximumTokens` (at least 1), full.
    public init(maximumTokens: Double = 10, tokensPerRequest: Double = 0.1) {
        self.maximumTokens = max(1, maximumTokens)
        self.tokensPerRequest = tokensPerRequest
        self.tokens = Locked(max(1, maximumTokens))
    }

    /// The tokens left.
    public var available: Double { tokens.withLock { $0 } }

    func deposit() {
        tokens.withLock { $0 = min(maximumTokens, $0 + tokensPerRequest) }
    }

    /// Takes a token for a retry, if more than half the bucket is left.
    func withdraw() -> Bool {
        tokens.withLock { tokens in
            guard tokens > maximumTokens / 2 else { return false }
            tokens -= 1
            return true
        }
    }
}
