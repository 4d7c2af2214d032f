import CourierTransport
import Foundation
import HTTPTypes
import Logging

/// Writes a session's requests to a swift-log `Logger`: at `debug`, one line per request
/// (method, URL, status, duration, bytes received, where the answer came from), one per retry
/// decision, and one when a WebSocket opens and one when it ends; at `trace`, also each
/// attempt's request headers and each response head's fields. The values of `Authorization`,
/// `Proxy-Authorization`, `Cookie` and `Set-Cookie` are written as `<redacted>`.
///
/// A manager whose `logger` is at `debug` or `trace` adds one by itself; add one to
/// `HTTPSessionConfiguration.eventMonitors` to log to another logger.
public struct LoggingMonitor: EventMonitor {
    /// Where the lines go.
    public let logger: Logger

    /// A monitor that logs to `logger`.
    public init(logger: Logger) {
        self.logger = logger
    }

    /// Writes the lines for `event`.
    public func handle(_ event: RequestEvent) async {
        let id = Logger.MetadataValue.stringConvertible(event.requestID)
        switch event.kind {
        case .finished(let request, let response, let metrics, let source):
            let from = source == .network ? "" : source == .cache ? " (from the cache)" : " (revalidated in the cache)"
            logger.debug(
                "\(request.method.rawValue) \(Self.url(of: request)) -> \(response.status.code) in \(Self.milliseconds(metrics.totalDuration)) ms, \(metrics.bytesReceived) bytes\(from)",
                metadata: ["request": id])
        case .failed(let request, let error, let attempts):
            let tries = attempts > 1 ? " after \(attempts) attempts" : ""
            logger.debug(
                "\(request.method.rawValue) \(Self.url(of: request)) failed\(tries): \(error)",
                metadata: ["request": id])
        case .retryDecided(let attempt, let error, let decision) where decision != .doNotRetry:
            logger.debug("attempt \(attempt) failed (\(error)); \(decision)", metadata: ["request": id])
        case .attemptStarted(let request, let attempt):
            guard logger.logLevel <= .trace else { return }
            logger.trace(
                "> \(request.method.rawValue) \(Self.url(of: request)) (attempt \(attempt))\n\(Self.lines(request.headerFields, prefix: "> "))",
                metadata: ["request": id])
        case .responseHead(let response, _):
            guard logger.logLevel <= .trace else { return }
            logger.trace(
                "< \(response.status.code) \(response.status.reasonPhrase)\n\(Self.lines(response.headerFields, prefix: "< "))",
                metadata: ["request": id])
        case .redirected(let from, let to, let response):
            logger.debug(
                "\(from.method.rawValue) \(Self.url(of: from)) -> \(response.status.code), redirected to \(to.method.rawValue) \(Self.url(of: to))",
                metadata: ["request": id])
        case .webSocketOpened(let request, let response, let subprotocol):
            logger.debug(
                "WebSocket \(Self.webSocketURL(of: request)) -> \(response.status.code)\(subprotocol.map { ", subprotocol \($0)" } ?? "")",
                metadata: ["request": id])
        case .webSocketClosed(let request, let code, let reason, let error):
            let how =
                error.map { "failed: \($0)" }
                ?? "closed with \(code.map(String.init) ?? "no code")\(reason.isEmpty ? "" : " \"\(reason)\"")"
            logger.debug("WebSocket \(Self.webSocketURL(of: request)) \(how)", metadata: ["request": id])
        default:
            return
        }
    }

    /// The ws or wss URL a WebSocket's handshake request stands for.
    static func webSocketURL(of request: HTTPRequest) -> String {
        WebSocketHandshake.webSocketURL(forHTTP: request.url)?.absoluteString ?? url(of: request)
    }

    /// Header fields whose values are secrets, written as `<redacted>`.
    public static let redactedFields: Set<HTTPField.Name> = [
        .authorization, .proxyAuthorization, .cookie, .setCookie,
    ]

    /// `fields` one per line, secrets redacted.
    static func lines(_ fields: HTTPFields, prefix: String) -> String {
        fields.map { field in
            "\(prefix)\(field.name.rawName): \(redactedFields.contains(field.name) ? "<redacted>" : field.value)"
        }.joined(separator: "\n")
    }

    static func url(of request: HTTPRequest) -> String {
        "\(request.scheme ?? "")://\(request.authority ?? "")\(request.path ?? "")"
    }

    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let value = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        return String(format: "%.1f", value)
    }
}
