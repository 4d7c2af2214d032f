import CourierCore
import CourierJSON
import Foundation
import HTTPTypes

/// A `multipart/form-data` body (RFC 7578), built part by part and streamed when sent: file
/// parts are read from disk as the request goes out, never copied into memory or a
/// temporary file, and the total length is known before sending (so upload progress has a
/// total).
///
/// ```swift
/// let reply: JSON = try await api.POST("upload", parameters: ["title": "Holiday"]) { form in
///     try form.append(fileAt: photoURL, name: "photo")        // type from the extension
///     form.append(thumbnail, name: "thumb", fileName: "t.jpg", mimeType: "image/jpeg")
/// }
/// ```
public struct MultipartFormData: Sendable {
    /// The boundary between parts: random, 32 characters after a `courier-` prefix.
    public let boundary: String
    private var parts: [Part] = []
    /// Why the form cannot be sent: the first part whose MIME type or extra headers would not
    /// be a well-formed part header. Thrown when the request is made, before anything is sent.
    package private(set) var refusal: CourierError?

    private struct Part: Sendable {
        var header: Data
        var content: BodySegment
    }

    /// Creates an empty form with a random boundary (or the one given).
    public init(boundary: String? = nil) {
        self.boundary = boundary ?? "courier-" + Self.randomBoundarySuffix()
    }

    /// `multipart/form-data; boundary=...`, for the request's `Content-Type`.
    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// The number of bytes the encoded body has.
    public var contentLength: Int64 {
        segments.reduce(0) { $0 + $1.length }
    }

    /// A text field.
    public mutating func append(_ value: String, name: String, headers: [String: String] = [:]) {
        append(Data(value.utf8), name: name, fileName: nil, mimeType: nil, headers: headers)
    }

    /// A part from bytes in memory. With a `fileName`, it is a file part (`mimeType` defaults
    /// to the one the file name's extension suggests).
    public mutating func append(
        _ data: Data, name: String, fileName: String? = nil, mimeType: String? = nil, headers: [String: String] = [:]
    ) {
        let type = mimeType ?? fileName.map(MIMEType.forFileName)
        parts.append(
            Part(header: header(name: name, fileName: fileName, mimeType: type, extra: headers), content: .data(data)))
    }

    /// A file part read from disk while the request is sent. The file name defaults to the
    /// URL's last component and the type to the one its extension suggests. Throws
    /// `CourierError.fileSystem` when the file cannot be read.
    public mutating func append(
        fileAt url: URL, name: String, fileName: String? = nil, mimeType: String? = nil,
        headers: [String: String] = [:]
    ) throws(CourierError) {
        let length = try Self.fileLength(url)
        let fileName = fileName ?? url.lastPathComponent
        let type = mimeType ?? MIMEType.forFileName(fileName)
        parts.append(
            Part(
                header: header(name: name, fileName: fileName, mimeType: type, extra: headers),
                content: .file(path: url.path, offset: 0, length: length)))
    }

    /// A part from a stream of known length (read while the request is sent). The stream must
    /// deliver exactly `length` bytes, or the request fails.
    public mutating func append<Bytes: AsyncSequence & Sendable>(
        stream: Bytes, length: Int64, name: String, fileName: String? = nil, mimeType: String? = nil,
        headers: [String: String] = [:]
    ) where Bytes.Element == Data {
        let type = mimeType ?? fileName.map(MIMEType.forFileName) ?? "application/octet-stream"
        parts.append(
            Part(
                header: header(name: name, fileName: fileName, mimeType: type, extra: headers),
                content: .stream(StreamBodyBridge(stream), length: length)))
    }

    /// Every field of `parameters` as a text part, with the query-string encoding's names for
    /// nested values (`user[name]`, `tags[]`).
    package mutating func append(parameters: JSON) throws(CourierError) {
        for (name, value) in try QueryStringEncoding.pairs(parameters) {
            append(value ?? "", name: name)
        }
    }

    /// The encoded body: each part's boundary line and headers, its content, then the closing
    /// boundary.
    package var segments: [BodySegment] {
        var segments: [BodySegment] = []
        for (index, part) in parts.enumerated() {
            let opening = (index == 0 ? "" : "\r\n") + "--\(boundary)\r\n"
            segments.append(.data(Data(opening.utf8) + part.header))
            segments.append(part.content)
        }
        segments.append(.data(Data(((parts.isEmpty ? "" : "\r\n") + "--\(boundary)--\r\n").utf8)))
        return segments
    }

    /// The encoded body, or the refusal of a part that cannot be written.
    package func checkedSegments() throws(CourierError) -> [BodySegment] {
        if let refusal { throw refusal }
        return segments
    }

    /// A part's header block. The name and file name are quoted (see `quoted(_:)`); the MIME
    /// type and extra headers go out as given, so one with CR, LF or NUL (which would start
    /// another header or part), or a header name that is not a token, refuses the form.
    private mutating func header(name: String, fileName: String?, mimeType: String?, extra: [String: String]) -> Data {
        var text = "Content-Disposition: form-data; name=\"\(Self.quoted(name))\""
        if let fileName { text += "; filename=\"\(Self.quoted(fileName))\"" }
        text += "\r\n"
        if let mimeType {
            if Self.breaksLine(mimeType) {
                refuse("The MIME type of part '\(name)' contains CR, LF or NUL: \(mimeType.debugDescription)")
            }
            text += "Content-Type: \(mimeType)\r\n"
        }
        for (field, value) in extra.sorted(by: { $0.key < $1.key }) {
            if HTTPField.Name(field) == nil {
                refuse("'\(field.debugDescription)' in part '\(name)' is not a valid header name")
            } else if Self.breaksLine(value) {
                refuse(
                    "The value of header '\(field)' in part '\(name)' contains CR, LF or NUL: \(value.debugDescription)"
                )
            }
            text += "\(field): \(value)\r\n"
        }
        return Data((text + "\r\n").utf8)
    }

    private mutating func refuse(_ message: String) {
        if refusal == nil { refusal = .invalidHeader(.init(message: message)) }
    }

    private static func breaksLine(_ value: String) -> Bool {
        value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0x00 }
    }

    /// Names and file names go into a quoted string as UTF-8, with `"`, CR and LF
    /// percent-encoded as browsers do (RFC 7578 section 4.2 and the HTML form encoding
    /// algorithm; the `filename*` form of RFC 5987 is not used, RFC 7578 forbids it).
    static func quoted(_ value: String) -> String {
        var result = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": result += "%22"
            case "\r": result += "%0D"
            case "\n": result += "%0A"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    package static func fileLength(_ url: URL) throws(CourierError) -> Int64 {
        var info = stat()
        guard stat(url.path, &info) == 0 else {
            throw .fileSystem(.init(url: url, message: "Cannot read \(url.path): \(String(cString: strerror(errno)))"))
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw .fileSystem(.init(url: url, message: "\(url.path) is not a regular file"))
        }
        guard access(url.path, R_OK) == 0 else {
            throw .fileSystem(.init(url: url, message: "Cannot read \(url.path): \(String(cString: strerror(errno)))"))
        }
        return Int64(info.st_size)
    }

    private static func randomBoundarySuffix() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<32).map { _ in alphabet[Int(generator.next(upperBound: UInt(alphabet.count)))] })
    }
}
