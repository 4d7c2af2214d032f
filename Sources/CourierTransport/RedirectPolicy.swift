import CourierCore
import CourierStorage
import Foundation
import HTTPTypes

/// How a redirect changes the request (RFC 9110 section 15.4, and what browsers and
/// URLSession do).
package enum RedirectPolicy {
    /// Headers that describe the body: dropped when the body is.
    static let bodyHeaders: [HTTPField.Name] = [.contentType, .contentEncoding, .contentLanguage, .contentLocation]
    /// Headers the caller set for the first origin: credentials, and a `Host` that names it
    /// (which, sent to another server, would ask it for the first one's site). Never sent to
    /// another origin, as curl drops them.
    static let originHeaders: [HTTPField.Name] = [
        .authorization, .cookie, .proxyAuthorization, HTTPField.Name("Host")!,
    ]

    /// The request that follows `response`, or nil when the request's redirect handler stopped
    /// here (the redirect is then the answer).
    package static func nextRequest(
        after request: TransferRequest, response: HTTPResponse, location: String, redirectCount: Int
    ) throws(CourierError) -> TransferRequest? {
        let code = response.status.code
        guard redirectCount < request.sharedOptions.value.maximumRedirects else {
            throw .tooManyRedirects(
                .init(
                    url: request.url, response: response,
                    message: "Stopped after \(request.sharedOptions.value.maximumRedirects) redirects"))
        }
        if let hsts = request.hsts { HSTSStore.note(response, of: request.head, in: hsts) }
        guard var target = URL(string: location), let scheme = target.scheme?.lowercased() else {
            throw .invalidURL(
                .init(url: request.url, response: response, message: "Invalid redirect location '\(location)'"))
        }
        guard scheme == "http" || scheme == "https" else {
            throw .unsupportedScheme(
                .init(url: target, response: response, message: "Refusing to follow a redirect to a \(scheme) URL"))
        }
        guard target.host?.isEmpty == false else {
            throw .invalidURL(
                .init(url: request.url, response: response, message: "Invalid redirect location '\(location)'"))
        }
        if let upgraded = request.hsts?.upgrade(target) { target = upgraded }
        var next = request
        next.urlString = HostName.normalizingHost(of: target.absoluteString)
        next.head.url = target
        // 301, 302 and 303 turn the request into a GET without body (HEAD stays HEAD);
        // 307 and 308 repeat it as it was.
        if code == 301 || code == 302 || code == 303, request.head.method != .get, request.head.method != .head {
            next.head.method = .get
            next.body = nil
            for name in bodyHeaders { next.head.headerFields[name] = nil }
        }
        if let body = next.body, !body.isReplayable {
            throw .serializationFailed(
                .init(
                    url: target, response: response,
                    message: "The request body is a stream and cannot be sent again for a \(code) redirect"))
        }
        if request.url.map({ !Self.sameOrigin($0, target) }) ?? true {
            // (The session's credentials stay with the request: each is sent only to the
            // origin it was given for, see `configure`.)
            for name in originHeaders { next.head.headerFields[name] = nil }
        }
        guard let handler = request.redirectHandler else { return next }
        let hop = RedirectHop(request: request.head, response: response, proposed: next.head, count: redirectCount)
        guard let chosen = handler(hop) else { return nil }
        if chosen != next.head {
            guard let url = chosen.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
                url.host?.isEmpty == false
            else {
                throw .invalidURL(
                    .init(
                        url: target, response: response,
                        message: "The redirect handler returned a request without an http(s) URL"))
            }
            if chosen.method != next.head.method, chosen.method == .get || chosen.method == .head { next.body = nil }
            next.head = chosen
            next.urlString = HostName.normalizingHost(of: url.absoluteString)
        }
        return next
    }

    static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        a.scheme?.lowercased() == b.scheme?.lowercased() && HostName.of(a) == HostName.of(b)
            && effectivePort(a) == effectivePort(b)
    }

    static func effectivePort(_ url: URL) -> Int? {
        url.port ?? HostName.defaultPort(forScheme: url.scheme)
    }
}
