import Foundation
import HTTPTypes

/// Builds an `HTTPResponse` from the header lines libcurl hands to `CURLOPT_HEADERFUNCTION`.
///
/// libcurl calls the header function once per line, including the status line and the blank
/// line that ends the head, for every response it reads: interim 1xx responses, and (when
/// libcurl follows redirects) each hop. A new status line therefore starts a new head.
/// Trailers of a chunked body arrive after the head is complete and are ignored.
struct ResponseHeadParser {
    private(set) var status: HTTPResponse.Status?
    private(set) var fields = HTTPFields()
    private(set) var isComplete = false
    /// `Content-Length` of the current head, when present and valid.
    private(set) var contentLength: Int64?

    mutating func reset() {
        status = nil
        fields = HTTPFields()
        isComplete = false
        contentLength = nil
    }

    /// The response head, once the blank line ending it has arrived.
    var response: HTTPResponse? {
        guard let status else { return nil }
        return HTTPResponse(status: status, headerFields: fields)
    }

    /// Whether the head that just completed is interim (1xx): the real one follows.
    var isInterim: Bool {
        guard let status else { return false }
        return status.kind == .informational
    }

    /// Feeds one header line, CRLF included. Returns true when this line completed a head.
    mutating func consume(_ line: UnsafeRawBufferPointer) -> Bool {
        var end = line.count
        while end > 0, line[end - 1] == 0x0A || line[end - 1] == 0x0D { end -= 1 }
        if end == 0 {
            // Blank line: end of a head.
            guard status != nil, !isComplete else { return false }
            isComplete = true
            return true
        }
        if line.count >= 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"), line[2] == UInt8(ascii: "T"),
            line[3] == UInt8(ascii: "P"), line[4] == UInt8(ascii: "/")
        {
            reset()
            status = Self.parseStatusLine(UnsafeRawBufferPointer(rebasing: line[0..<end]))
            return false
        }
        guard status != nil, !isComplete else { return false }  // trailers, or garbage before a status line
        if line[0] == 0x20 || line[0] == 0x09 {
            return false  // obsolete line folding (RFC 9112 section 5.2): ignored
        }
        guard let colon = line[0..<end].firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return false }
        let nameText = String(decoding: UnsafeRawBufferPointer(rebasing: line[0..<colon]), as: UTF8.self)
        var valueStart = colon + 1
        var valueEnd = end
        while valueStart < valueEnd, line[valueStart] == 0x20 || line[valueStart] == 0x09 { valueStart += 1 }
        while valueEnd > valueStart, line[valueEnd - 1] == 0x20 || line[valueEnd - 1] == 0x09 { valueEnd -= 1 }
        guard let name = HTTPField.Name(nameText) else { return false }
        let value = UnsafeRawBufferPointer(rebasing: line[valueStart..<valueEnd])
        let field = HTTPField(name: name, value: value)
        if name == .contentLength {
            contentLength = Int64(field.value)
        }
        fields.append(field)
        return false
    }

    /// `HTTP/1.1 200 OK`, `HTTP/2 204`: the code, and the reason phrase when there is one.
    static func parseStatusLine(_ line: UnsafeRawBufferPointer) -> HTTPResponse.Status? {
        guard let space = line.firstIndex(of: 0x20) else { return nil }
        var index = space
        while index < line.count, line[index] == 0x20 { index += 1 }
        guard index + 3 <= line.count else { return nil }
        var code = 0
        for offset in 0..<3 {
            let byte = line[index + offset]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            code = code * 10 + Int(byte - UInt8(ascii: "0"))
        }
        guard code >= 100, code <= 999 else { return nil }
        index += 3
        while index < line.count, line[index] == 0x20 { index += 1 }
        let reason = String(decoding: UnsafeRawBufferPointer(rebasing: line[index..<line.count]), as: UTF8.self)
        return HTTPResponse.Status(code: code, reasonPhrase: reason)
    }
}
