import CourierCore
import CourierStorage
import Foundation
import HTTPTypes

/// One request as the engine runs it: head, absolute URL, body and per-transfer options, all
/// prepared (serialized, adapted, validated) before it reaches the engine thread.
package struct TransferRequest: Sendable {
    /// The request head as the manager built and `adapt(_:)` returned it.
    package var head: HTTPRequest
    /// The absolute http(s) URL as text, as libcurl takes it; `head`'s scheme, authority and
    /// path make it up.
    package var urlString: String
    /// The request body, if any.
    package var body: RequestBody?
    /// Large transfers (downloads, streams, uploads) get larger libcurl buffers.
    package var usesLargeBuffers = false
    /// Credentials for the server, each with the origin it was given for. Each hop
    /// authenticates with the one for its own origin, if any (libcurl negotiates Basic, Digest
    /// or NTLM): a redirect may cross origins, a credential never does.
    package var credentials: [ScopedCredential] = []
    /// Authenticate with the proxy with this (kept across redirects: the proxy stays the same).
    package var proxyCredential: Credential?
    /// Limits, timeouts and protocol choices, shared by reference (see `SharedTransferOptions`).
    ///
    /// Read a field in place, `sharedOptions.value.idleTimeout`: there is no computed
    /// `options`, because from another module a `_read` accessor is a coroutine whose frame
    /// (a copy of the 250-byte set) is allocated on the heap at every read, and a getter copies
    /// the set and retains its references.
    package var sharedOptions: SharedTransferOptions
    /// Told about response heads and redirects (when the session has event monitors).
    package var observer: (any TransferObserver)?
    /// Whether a failure ends the progress streams. False when the pipeline may try the
    /// request again: the next attempt reports on the same streams, and the caller ends them
    /// after the last.
    package var failureEndsProgress = true
    /// Notes `Strict-Transport-Security` from verified https responses, and upgrades http
    /// redirects to hosts it knows; nil when the session does not honour it (or does not
    /// verify certificates).
    package var hsts: HSTSStore?
    /// What origins advertised of HTTP/3 (`Alt-Svc`): the engine consults and updates it for
    /// `.http3WhenAdvertised` hops; nil otherwise.
    package var altServices: AltServiceStore?
    /// Sees each redirect before it is followed (see `RedirectBehavior.handler`).
    package var redirectHandler: (@Sendable (RedirectHop) -> HTTPRequest?)?
    /// Where the transfer goes in the session's queue, and its HTTP/2 stream weight.
    package var priority: RequestPriority = .normal
    /// When the call this transfer belongs to must be over (its resource timeout, counted from
    /// the call's start): the transfer fails with `timedOut` then, whether it is still waiting
    /// for a place in the session's queue or running. nil: only the options' timeouts apply.
    package var deadline: ContinuousClock.Instant?

    /// A request with no credentials, buffers of the default size and no observer.
    package init(head: HTTPRequest, urlString: String, body: RequestBody?, options: SharedTransferOptions) {
        self.head = head
        self.urlString = urlString
        self.body = body
        self.sharedOptions = options
    }

    /// A request with options of its own.
    package init(head: HTTPRequest, urlString: String, body: RequestBody?, options: TransferOptions) {
        self.init(head: head, urlString: urlString, body: body, options: SharedTransferOptions(options))
    }

    /// The URL, parsed on demand (error messages, redirects): the request path never parses it.
    package var url: URL? { URL(string: urlString) }

    /// A GET or HEAD without body: the shape whose easy handle can be reused without a reset.
    package var isPlain: Bool {
        body == nil && !usesLargeBuffers && credentials.isEmpty && proxyCredential == nil
            && (head.method == .get || head.method == .head)
    }
}

/// A credential for the server, and the origin (scheme, host and port) it may be sent to.
package struct ScopedCredential: Sendable {
    package var origin: ProtectionSpace
    package var credential: Credential

    /// `credential` for the origin of `url`; nil when `url` has none.
    package init?(_ credential: Credential, for url: URL?) {
        guard let url, let space = ProtectionSpace(url: url) else { return nil }
        self.origin = space.origin
        self.credential = credential
    }

    package init(_ credential: Credential, for space: ProtectionSpace) {
        self.origin = space.origin
        self.credential = credential
    }
}

extension [ScopedCredential] {
    /// The credential given for the origin of `url`, if any.
    package func credential(for url: URL?) -> Credential? {
        guard !isEmpty, let url, let origin = ProtectionSpace(url: url) else { return nil }
        return first { $0.origin == origin }?.credential
    }
}

/// A redirect about to be followed, as a redirect handler sees it.
public struct RedirectHop: Sendable {
    /// The request that was answered with a redirect.
    public var request: HTTPRequest
    /// The redirect response (its body is not kept).
    public var response: HTTPResponse
    /// The request Courier would send next: the `Location` resolved, the method and body
    /// changed as RFC 9110 says for 301, 302 and 303, credentials and cookies dropped for
    /// another origin.
    public var proposed: HTTPRequest
    /// Redirects followed before this one.
    public var count: Int
}
