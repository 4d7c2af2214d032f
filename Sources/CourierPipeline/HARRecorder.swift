@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes

/// An event monitor that writes the session's exchanges to a HAR 1.2 file (the HTTP Archive
/// format browsers and proxies export): each redirect hop and each finished request is an
/// entry with its request, response, body and timings. `StubTransport(replaying:)` in
/// `CourierTesting` answers requests from such a file, and `courier --har FILE` writes one.
///
/// ```swift
/// var configuration = HTTPSessionConfiguration.default
/// configuration.eventMonitors.append(HARRecorder(file: URL(fileURLWithPath: "/tmp/session.har")))
/// ```
///
/// The values of `Authorization`, `Proxy-Authorization`, `Cookie` and `Set-Cookie` are written
/// as `<redacted>`, as the logging monitor writes them, and so is a password in a URL. A body
/// longer than ``maximumBodySize`` is left out (its size stays). The file is rewritten whole,
/// atomically, after each entry: it can be opened at any time. Failed requests, which have no
/// response, are not entries.
public final class HARRecorder: EventMonitor, Sendable {
    /// Where the archive is written.
    public let file: URL
    /// Bodies up to this many bytes are kept (as text, or base64 when they are not UTF-8).
    public let maximumBodySize: Int

    private struct State {
        var started: [UInt64: Date] = [:]
        /// Each entry as JSON.
        var entries: [Data] = []
    }

    private let state = Locked(State())

    /// A recorder writing to `file`, keeping bodies up to `maximumBodySize` bytes (1 MiB).
    public init(file: URL, maximumBodySize: Int = 1 << 20) {
        self.file = file
        self.maximumBodySize = maximumBodySize
    }

    /// Notes each request's start and writes an entry per response.
    public func handle(_ event: RequestEvent) async {
        switch event.kind {
        case .created, .attemptStarted:
            state.withLock { $0.started[event.requestID] = event.date }
        case .redirected(let from, _, let response):
            record(event, request: from, response: response, body: nil, metrics: nil, source: nil)
            state.withLock { $0.started[event.requestID] = event.date }
        case .finished(let request, let response, let metrics, let source):
            record(
                event, request: request, response: response, body: event.responseBody, metrics: metrics, source: source)
            state.withLock { _ = $0.started.removeValue(forKey: event.requestID) }
        case .failed:
            state.withLock { _ = $0.started.removeValue(forKey: event.requestID) }
        default:
            break
        }
    }

    /// The archive as it stands: HAR 1.2 JSON.
    public func archive() -> Data {
        state.withLock { state in Self.document(state.entries) }
    }

    private func record(
        _ event: RequestEvent, request: HTTPRequest, response: HTTPResponse, body: Data?, metrics: TransferMetrics?,
        source: ResponseSource?
    ) {
        let object = entry(event, request: request, response: response, body: body, metrics: metrics, source: source)
        let entry = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        let document = state.withLock { state -> Data in
            state.entries.append(entry)
            return Self.document(state.entries)
        }
        try? document.write(to: file, options: .atomic)
    }

    /// The HAR document around `entries` (each a JSON object), one entry per line.
    private static func document(_ entries: [Data]) -> Data {
        var document = Data(
            #"{"log": {"version": "1.2", "creator": {"name": "Courier", "version": "1"}, "pages": [], "entries": ["#
                .utf8)
        for (index, entry) in entries.enumerated() {
            document.append(contentsOf: index == 0 ? "\n".utf8 : ",\n".utf8)
            document.append(entry)
        }
        document.append(contentsOf: "\n]}}\n".utf8)
        return document
    }

    private func entry(
        _ event: RequestEvent, request: HTTPRequest, response: HTTPResponse, body: Data?, metrics: TransferMetrics?,
        source: ResponseSource?
    ) -> [String: Any] {
        let started = state.withLock { $0.started[event.requestID] } ?? event.date
        let url = Self.redactedURL(request)
        let version = metrics.map { Self.httpVersion($0.httpVersion) } ?? "HTTP/1.1"
        var content: [String: Any] = [
            "size": body?.count ?? 0, "mimeType": response.headerFields[.contentType] ?? "",
        ]
        if let body {
            if body.count > maximumBodySize {
                content["comment"] = "a body of \(body.count) bytes, over the recorder's limit of \(maximumBodySize)"
            } else if let text = String(data: body, encoding: .utf8) {
                content["text"] = text
            } else {
                content["text"] = body.base64EncodedString()
                content["encoding"] = "base64"
            }
        }
        var entry: [String: Any] = [
            "startedDateTime": Self.timestamp(started),
            "time": metrics.map { Self.milliseconds($0.totalDuration) } ?? 0,
            "request": [
                "method": request.method.rawValue, "url": url, "httpVersion": version, "cookies": [] as [Any],
                "headers": Self.fields(request.headerFields, host: request.authority),
                "queryString": Self.query(of: url), "headersSize": -1, "bodySize": -1,
            ] as [String: Any],
            "response": [
                "status": response.status.code, "statusText": response.status.reasonPhrase, "httpVersion": version,
                "cookies": [] as [Any], "headers": Self.fields(response.headerFields, host: nil), "content": content,
                "redirectURL": response.headerFields[.location] ?? "", "headersSize": -1,
                "bodySize": metrics.map { Int($0.bytesReceived) } ?? -1,
            ] as [String: Any],
            "cache": [:] as [String: Any],
            "timings": metrics.map(Self.timings) ?? ["send": 0, "wait": 0, "receive": 0],
        ]
        if let ip = metrics?.remoteIP, !ip.isEmpty { entry["serverIPAddress"] = ip }
        if let source { entry["_courierSource"] = "\(source)" }
        return entry
    }

    /// The request's URL without a password in it.
    static func redactedURL(_ request: HTTPRequest) -> String {
        guard let url = request.url, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            return request.url?.absoluteString ?? ""
        }
        if components.password != nil { components.password = "<redacted>" }
        return components.string ?? url.absoluteString
    }

    private static func fields(_ fields: HTTPFields, host: String?) -> [[String: String]] {
        var list: [[String: String]] = host.map { [["name": "Host", "value": $0]] } ?? []
        for field in fields {
            let secret = LoggingMonitor.redactedFields.contains(field.name)
            list.append(["name": field.name.rawName, "value": secret ? "<redacted>" : field.value])
        }
        return list
    }

    private static func query(of url: String) -> [[String: String]] {
        (URLComponents(string: url)?.queryItems ?? []).map { ["name": $0.name, "value": $0.value ?? ""] }
    }

    private static func timings(_ metrics: TransferMetrics) -> [String: Any] {
        let dns = milliseconds(metrics.nameLookup)
        let connected = milliseconds(metrics.connect)
        let secured = milliseconds(metrics.tlsHandshake)
        let first = milliseconds(metrics.firstByte)
        let total = milliseconds(metrics.totalDuration)
        let ready = max(connected, secured)
        return [
            "blocked": -1, "dns": dns, "connect": max(0, connected - dns),
            "ssl": secured > 0 ? max(0, secured - connected) : -1, "send": 0, "wait": max(0, first - ready),
            "receive": max(0, total - first),
        ]
    }

    private static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }

    private static func httpVersion(_ version: String) -> String {
        switch version {
        case "2", "2.0": "HTTP/2"
        case "3", "3.0": "HTTP/3"
        case "1.0": "HTTP/1.0"
        default: "HTTP/1.1"
        }
    }

    /// ISO 8601 with milliseconds, in UTC (HAR's `startedDateTime`): one value style for every
    /// entry, not a formatter made per entry.
    private static let timestampStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    private static func timestamp(_ date: Date) -> String {
        date.formatted(timestampStyle)
    }
}
