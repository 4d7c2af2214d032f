import CourierCore
import Foundation
import HTTPTypes

extension HTTPRequest {
    /// This request as a `curl` command line that can be pasted into a shell: method, URL,
    /// header fields and, when given, the body. The values of `Authorization`,
    /// `Proxy-Authorization`, `Cookie` and `Set-Cookie` are written as `<redacted>` unless
    /// `revealingSecrets` is true.
    ///
    /// A body that is not UTF-8 text is left out, with a comment saying its size.
    public func cURLDescription(body: Data? = nil, revealingSecrets: Bool = false) -> String {
        var parts = ["curl"]
        switch method {
        case .get where body == nil: break
        case .head: parts.append("--head")
        default: parts.append("-X \(method.rawValue)")
        }
        let url = "\(scheme ?? "https")://\(authority ?? "")\(path ?? "/")"
        parts.append(Self.shellQuoted(url))
        for field in headerFields {
            let secret = !revealingSecrets && LoggingMonitor.redactedFields.contains(field.name)
            parts.append("-H \(Self.shellQuoted("\(field.name.rawName): \(secret ? "<redacted>" : field.value)"))")
        }
        var comment = ""
        if let body, !body.isEmpty {
            if let text = String(data: body, encoding: .utf8), !text.contains("\0") {
                parts.append("--data-binary \(Self.shellQuoted(text))")
            } else {
                comment = " # and a binary body of \(body.count) bytes"
            }
        }
        return parts.joined(separator: " \\\n  ") + comment
    }

    /// `text` in single quotes, each `'` in it written as `'\''`.
    static func shellQuoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

extension RawResponse {
    /// The request that got this response (the final hop's) as a `curl` command line, secrets
    /// redacted unless `revealingSecrets`; see `HTTPRequest.cURLDescription(body:revealingSecrets:)`.
    public func cURLDescription(revealingSecrets: Bool = false) -> String {
        request.cURLDescription(revealingSecrets: revealingSecrets)
    }
}
