import Foundation
import HTTPTypes

/// A response head as the transport recorded it: the lines libcurl hands to
/// `CURLOPT_HEADERFUNCTION`, read one at a time by ``consume(_:)``, and the facts checked on the
/// way. The record a transfer's output, its sink and its observers are given; ``ResponseHead``
/// turns it into `HTTPFields` when someone reads them.
///
/// libcurl calls the header function once per line, including the status line and the blank
/// line that ends the head, for every head it reads (interim 1xx responses included), so a new
/// status line starts a new head. Trailers of a chunked body (or an HTTP/2 response's trailing
/// fields) arrive after the head is complete and are kept apart (``trailers``).
///
/// On the engine thread it only copies the lines and picks out the few facts the engine needs
/// (status, `Content-Length`, `Content-Encoding`, `Location`); building `HTTPFields`, which
/// validates and lower-cases every name, happens later on the caller's side (``response``).
///
/// It also refuses what libcurl 7.88 lets through or reports in words of its own: two different
/// `Content-Length` values (libcurl keeps the last), a `Content-Length` that is not a number
/// (libcurl reads `1 2` as 1 and a number too large for 64 bits as "unknown"), and header lines
/// adding up to more than ``maximumHeadBytes``.
package struct RecordedHead: Sendable {
    /// A head with nothing read yet.
    package init() {}

    /// The most bytes of header lines read for one request, CRLFs included: every head (interim
    /// 1xx heads too) and the trailers of a chunked body. libcurl 7.88 stops at 300 KB with a
    /// receive error; this lower limit is checked first, so the failure says what happened.
    static let maximumHeadBytes = 256 * 1024

    /// What one line did to the head.
    package enum LineResult {
        /// More lines follow (or the line was a trailer).
        case partial
        /// The line completed a head.
        case complete
        /// The response is not valid HTTP: the message says why.
        case invalid(String)
    }

    package private(set) var statusCode = 0
    package private(set) var isComplete = false
    /// `Content-Length` of the current head, when present and not overridden by
    /// `Transfer-Encoding`.
    package private(set) var contentLength: Int64?
    package private(set) var hasContentEncoding = false
    package private(set) var hasLocation = false
    package private(set) var hasSetCookie = false
    /// The completed head had both `Transfer-Encoding` and `Content-Length`: the first decided
    /// where the body ends (RFC 9112 section 6.3, as libcurl does), and the connection must
    /// not carry another response, since the sender may be trying to split responses.
    package private(set) var transferEncodingOverrodeLength = false
    private var hasTransferEncoding = false
    /// A `Transfer-Encoding` names more than `chunked` (a compression, or a coding libcurl may
    /// not know): the engine then checks the codings (`passesCodingsThroughIfUnknown`).
    package private(set) var hasTransferCoding = false
    /// The reason phrase, then each header line, each followed by LF.
    private var lines: [UInt8] = []
    private var reasonLength = 0
    /// The trailer lines of the current response, each followed by LF.
    private var trailerLines: [UInt8] = []
    /// Bytes of header lines received for the current request, every head and trailer included.
    private var receivedBytes = 0

    /// Starts over for a new request.
    package mutating func reset() {
        startHead()
        receivedBytes = 0
    }

    /// Starts over for a new head of the same request (after an interim 1xx head).
    private mutating func startHead() {
        statusCode = 0
        isComplete = false
        contentLength = nil
        hasContentEncoding = false
        hasLocation = false
        hasSetCookie = false
        transferEncodingOverrodeLength = false
        hasTransferEncoding = false
        hasTransferCoding = false
        lines.removeAll(keepingCapacity: true)
        reasonLength = 0
        trailerLines.removeAll()
    }

    /// Whether the head that just completed is interim (1xx): the real one follows.
    package var isInterim: Bool { statusCode >= 100 && statusCode < 200 }

    /// Feeds one header line, CRLF included.
    package mutating func consume(_ line: UnsafeRawBufferPointer) -> LineResult {
        receivedBytes += line.count
        if receivedBytes > Self.maximumHeadBytes {
            return .invalid("The response head is larger than \(Self.maximumHeadBytes) bytes")
        }
        var end = line.count
        while end > 0, line[end - 1] == 0x0A || line[end - 1] == 0x0D { end -= 1 }
        if end == 0 {
            guard statusCode != 0, !isComplete else { return .partial }
            isComplete = true
            if hasTransferEncoding, contentLength != nil {
                contentLength = nil
                transferEncodingOverrodeLength = true
            }
            return .complete
        }
        if end >= 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"), line[2] == UInt8(ascii: "T"),
            line[3] == UInt8(ascii: "P"), line[4] == UInt8(ascii: "/")
        {
            startHead()
            let statusLine = UnsafeRawBufferPointer(rebasing: line[0..<end])
            guard parseStatusLine(statusLine) else {
                // Checked here, not left to libcurl: some versions read `HTTP/1.1 2000 OK` as 200.
                return .invalid(
                    "The server's status line is not HTTP: '\(String(decoding: statusLine, as: UTF8.self))'")
            }
            return .partial
        }
        guard statusCode != 0 else { return .partial }  // garbage before a status line
        let text = UnsafeRawBufferPointer(rebasing: line[0..<end])
        if isComplete {
            // A trailer: kept apart from the head (its fields say nothing of the framing).
            trailerLines.append(contentsOf: text)
            trailerLines.append(0x0A)
            return .partial
        }
        // The first letter picks the candidates (most lines match none of them).
        switch text[0] | 0x20 {
        case UInt8(ascii: "c"):
            if Self.hasName(text, "content-length") {
                if let problem = recordContentLength(text) { return .invalid(problem) }
            } else if Self.hasName(text, "content-encoding") {
                hasContentEncoding = true
            }
        case UInt8(ascii: "l"):
            if Self.hasName(text, "location") { hasLocation = true }
        case UInt8(ascii: "s"):
            if Self.hasName(text, "set-cookie") { hasSetCookie = true }
        case UInt8(ascii: "t"):
            if Self.hasName(text, "transfer-encoding") {
                hasTransferEncoding = true
                let value = text.trimmingWhitespace(18..<text.count)
                let chunked: StaticString = "chunked"
                if value.count != chunked.utf8CodeUnitCount
                    || !zip(text[value], UnsafeBufferPointer(start: chunked.utf8Start, count: 7)).allSatisfy({
                        $0 | 0x20 == $1
                    })
                {
                    hasTransferCoding = true
                }
            }
        default:
            break
        }
        lines.append(contentsOf: text)
        lines.append(0x0A)
        return .partial
    }

    /// Records the value of a `Content-Length` line; returns what is wrong with it, if anything.
    ///
    /// RFC 9112 section 6.3: a value that is not a number, or two lines with different numbers,
    /// leave the end of the body unknown, which is a framing error. The same number repeated,
    /// on several lines or as a list (`5, 5`), is one length (RFC 9110 section 8.6).
    private mutating func recordContentLength(_ line: UnsafeRawBufferPointer) -> String? {
        let valueRange = line.trimmingWhitespace(15..<line.count)
        guard let value = Self.lengthList(line, valueRange) else {
            let shown = valueRange.prefix(64)
            var text = String(decoding: UnsafeRawBufferPointer(rebasing: line[shown]), as: UTF8.self)
            if shown.count < valueRange.count { text += "..." }
            return "The response's Content-Length is not a valid length: '\(text)'"
        }
        if let contentLength, contentLength != value {
            return "The response has two different Content-Length values: \(contentLength) and \(value)"
        }
        contentLength = value
        return nil
    }

    /// The status and reason phrase.
    package var status: HTTPResponse.Status {
        let reason = lines.withUnsafeBytes {
            String(decoding: UnsafeRawBufferPointer(rebasing: $0[0..<reasonLength]), as: UTF8.self)
        }
        return HTTPResponse.Status(code: statusCode, reasonPhrase: reason)
    }

    /// The trimmed value of the last field named `canonicalName` (lower case), if any: one
    /// scan of the recorded lines, one `String`.
    package func lastValue(of canonicalName: String) -> String? {
        var last: Range<Int>?
        forEachValue(of: canonicalName) { last = $0 }
        return last.map(string(in:))
    }

    /// The trimmed values of every field named `canonicalName` (lower case), in order.
    package func values(of canonicalName: String) -> [String] {
        var found: [String] = []
        forEachValue(of: canonicalName) { found.append(string(in: $0)) }
        return found
    }

    /// Calls `body` with the bytes of the trimmed value of every field named `canonicalName`
    /// (lower case), in order, without making strings.
    package func forEachValueBytes(of canonicalName: String, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        lines.withUnsafeBufferPointer { bytes in
            forEachValue(of: canonicalName) { body(UnsafeBufferPointer(rebasing: bytes[$0])) }
        }
    }

    /// Calls `body` with where, in `lines`, the trimmed value of each field named
    /// `canonicalName` is (names compared case-insensitively).
    private func forEachValue(of canonicalName: String, _ body: (Range<Int>) -> Void) {
        var canonicalName = canonicalName
        canonicalName.withUTF8 { name in
            lines.withUnsafeBytes { bytes in
                var start = reasonLength + 1
                while start < bytes.count {
                    let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
                    if end - start > name.count, bytes[start + name.count] == UInt8(ascii: ":"),
                        name.indices.allSatisfy({ bytes[start + $0] | 0x20 == name[$0] | 0x20 })
                    {
                        body(bytes.trimmingWhitespace((start + name.count + 1)..<end))
                    }
                    start = end + 1
                }
            }
        }
    }

    private func string(in range: Range<Int>) -> String {
        lines.withUnsafeBytes { String(decoding: UnsafeRawBufferPointer(rebasing: $0[range]), as: UTF8.self) }
    }

    /// The response head: status, reason phrase and fields. Invalid field names are skipped,
    /// invalid value bytes become spaces (`HTTPField`'s rules); obsolete line folding is dropped.
    package var response: HTTPResponse? {
        guard statusCode != 0 else { return nil }
        return lines.withUnsafeBytes { bytes -> HTTPResponse in
            let reason = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[0..<reasonLength]), as: UTF8.self)
            var fields: [HTTPField] = []
            fields.reserveCapacity(16)
            var start = reasonLength + 1
            while start < bytes.count {
                let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
                Self.appendField(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), to: &fields)
                start = end + 1
            }
            // One bulk insertion: `HTTPFields.append` per field goes through replaceSubrange.
            return HTTPResponse(
                status: .init(code: statusCode, reasonPhrase: reason), headerFields: HTTPFields(fields))
        }
    }

    /// The trailer fields that followed the body; nil when none came.
    package var trailers: HTTPFields? {
        guard !trailerLines.isEmpty else { return nil }
        return trailerLines.withUnsafeBytes { bytes -> HTTPFields in
            var fields: [HTTPField] = []
            var start = 0
            while start < bytes.count {
                let end = bytes[start...].firstIndex(of: 0x0A) ?? bytes.count
                Self.appendField(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), to: &fields)
                start = end + 1
            }
            return HTTPFields(fields)
        }
    }

    private static func appendField(_ line: UnsafeRawBufferPointer, to fields: inout [HTTPField]) {
        guard let first = line.first, first != 0x20, first != 0x09 else { return }  // obs-fold
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return }
        let nameBytes = UnsafeRawBufferPointer(rebasing: line[0..<colon])
        guard let name = Self.commonName(nameBytes) ?? HTTPField.Name(String(decoding: nameBytes, as: UTF8.self))
        else { return }
        let value = line.trimmingWhitespace((colon + 1)..<line.count)
        fields.append(HTTPField(name: name, value: UnsafeRawBufferPointer(rebasing: line[value])))
    }

    /// Names servers send on almost every response, matched byte for byte in the casing they
    /// are usually sent in, so that building `HTTPFields` skips validating and lower-casing them.
    /// A name sent in other casing takes the general path and keeps its casing.
    private static let commonNames: [(bytes: [UInt8], name: HTTPField.Name)] = [
        HTTPField.Name.contentType, .contentLength, .date, .server, .connection, .lastModified, .eTag, .acceptRanges,
        .cacheControl, .contentEncoding, .transferEncoding, .vary, .expires, .location, .setCookie, .age,
        .accessControlAllowOrigin, .accessControlAllowCredentials,
    ].map { (Array($0.rawName.utf8), $0) }

    private static func commonName(_ bytes: UnsafeRawBufferPointer) -> HTTPField.Name? {
        for entry in commonNames where entry.bytes.count == bytes.count && entry.bytes.elementsEqual(bytes) {
            return entry.name
        }
        return nil
    }

    /// Whether the line starts with `name:` (ASCII case-insensitive; `name` is lower case).
    private static func hasName(_ line: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        let count = name.utf8CodeUnitCount
        guard line.count > count, line[count] == UInt8(ascii: ":") else { return false }
        let expected = name.utf8Start
        for index in 0..<count where line[index] | 0x20 != expected[index] { return false }
        return true
    }

    /// The number in `range`: one decimal number, or a comma-separated list of copies of one
    /// number. Nil for anything else: nothing, a sign, other characters, different numbers, or
    /// a number beyond `Int64`.
    private static func lengthList(_ line: UnsafeRawBufferPointer, _ range: Range<Int>) -> Int64? {
        var result: Int64?
        var start = range.lowerBound
        while true {
            let comma = line[start..<range.upperBound].firstIndex(of: UInt8(ascii: ",")) ?? range.upperBound
            guard let number = decimal(line, line.trimmingWhitespace(start..<comma)), result ?? number == number
            else { return nil }
            result = number
            guard comma < range.upperBound else { return result }
            start = comma + 1
        }
    }

    private static func decimal(_ line: UnsafeRawBufferPointer, _ range: Range<Int>) -> Int64? {
        guard !range.isEmpty else { return nil }
        var value: Int64 = 0
        for index in range {
            let digit = line[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (tens, overflowed) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowedAgain) = tens.addingReportingOverflow(Int64(digit))
            guard !overflowed, !overflowedAgain else { return nil }
            value = sum
        }
        return value
    }

    /// `HTTP/1.1 200 OK`, `HTTP/2 204`: the code, and the reason phrase when there is one.
    /// Reads `HTTP/x.y SP 3DIGIT [SP reason]` (RFC 9112 section 4): false when the line is not
    /// one (no space after the version, a status that is not three digits from 100 on, or more
    /// digits after them).
    private mutating func parseStatusLine(_ line: UnsafeRawBufferPointer) -> Bool {
        guard let space = line.firstIndex(of: 0x20) else { return false }
        var index = space
        while index < line.count, line[index] == 0x20 { index += 1 }
        guard index + 3 <= line.count else { return false }
        var code = 0
        for offset in 0..<3 {
            let byte = line[index + offset]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return false }
            code = code * 10 + Int(byte - UInt8(ascii: "0"))
        }
        guard code >= 100, index + 3 == line.count || line[index + 3] == 0x20 || line[index + 3] == 0x09 else {
            return false
        }
        if lines.capacity < 512 { lines.reserveCapacity(512) }  // one allocation for a typical head
        index += 3
        while index < line.count, line[index] == 0x20 { index += 1 }
        lines.append(contentsOf: line[index...])
        reasonLength = line.count - index
        lines.append(0x0A)
        statusCode = code
        return true
    }
}
