import CourierCore
import Foundation
import HTTPTypes

/// The checks every response serializer makes before it reads the body: an acceptable status
/// code, then an acceptable `Content-Type` (AFURLResponseSerialization's order).
public struct ResponseValidation: Sendable, Hashable {
    /// Status codes that count as success. Default `200..<300`.
    public var acceptableStatusCodes: StatusCodeSet
    /// Media types accepted, or nil for any. Entries are `type/subtype`, `type/*`, `*/*`, or
    /// `*/*+suffix` for structured-syntax suffixes (RFC 6838 section 4.2.8), e.g. `*/*+json`.
    public var acceptableContentTypes: Set<String>?

    /// Creates a validation.
    public init(acceptableStatusCodes: some Sequence<Int> = 200..<300, acceptableContentTypes: Set<String>? = nil) {
        self.acceptableStatusCodes = StatusCodeSet(acceptableStatusCodes)
        self.acceptableContentTypes = acceptableContentTypes.map { Set($0.map { $0.lowercased() }) }
    }

    /// 200..<300 and the JSON media types: the checks of a decoding serializer by default.
    package static let defaultJSON = ResponseValidation(
        acceptableContentTypes: JSONResponseSerializer.defaultContentTypes)

    /// Throws `unacceptableStatusCode` or `unacceptableContentType` when the response fails.
    /// An empty body has no content to judge, so its `Content-Type` is not checked (as
    /// Alamofire's `validate(contentType:)`); the serializer decides whether empty is allowed.
    public func validate(_ response: RawResponse) throws(CourierError) {
        let code = response.status.code
        guard acceptableStatusCodes.contains(code) else {
            throw .unacceptableStatusCode(response.errorContext("Unacceptable status code \(code)"))
        }
        guard let acceptableContentTypes, !response.data.isEmpty else { return }
        guard let mediaType = Self.mediaType(response.head.lastValue(of: .contentType)) else {
            throw .unacceptableContentType(
                response.errorContext(
                    "The response has no Content-Type; expected one of \(acceptableContentTypes.sorted())"))
        }
        guard Self.matches(mediaType, acceptableContentTypes) else {
            throw .unacceptableContentType(
                response.errorContext(
                    "Unacceptable content type \(mediaType); expected one of \(acceptableContentTypes.sorted())"))
        }
    }

    /// The lower-cased `type/subtype` of the `Content-Type`, without parameters. When the
    /// field is repeated, the last one counts (as browsers do; it is not a list field).
    public static func mediaType(of response: HTTPResponse) -> String? {
        mediaType(contentType(of: response))
    }

    /// The part before any `;`, without surrounding spaces and tabs, ASCII letters in lower
    /// case (media types are ASCII tokens, RFC 9110 section 8.3.1). Every JSON response goes
    /// through here, so it reads the bytes once: Foundation's `trimmingCharacters(in:)` goes
    /// through `NSString` on Linux and took over a tenth of the decoding benchmark's pool time.
    static func mediaType(_ contentType: String?) -> String? {
        guard var value = contentType else { return nil }
        return value.withUTF8 { bytes -> String? in
            let range = bytes.trimmingWhitespace(0..<(bytes.firstIndex(of: UInt8(ascii: ";")) ?? bytes.count))
            guard !range.isEmpty else { return nil }
            let type = UnsafeBufferPointer(rebasing: bytes[range])
            func isUpper(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") }
            guard type.contains(where: isUpper) else { return String(decoding: type, as: UTF8.self) }
            return String(decoding: type.lazy.map { isUpper($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
        }
    }

    /// A parameter of the `Content-Type` (e.g. `charset`), unquoted, when present.
    static func contentTypeParameter(_ name: String, of contentType: String?) -> String? {
        guard let value = contentType else { return nil }
        for parameter in value.split(separator: ";").dropFirst() {
            let parts = parameter.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces).lowercased() == name else { continue }
            return parts[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(
                in: CharacterSet(charactersIn: "\""))
        }
        return nil
    }

    static func contentType(of response: HTTPResponse) -> String? {
        response.headerFields[values: .contentType].last
    }

    static func matches(_ mediaType: String, _ patterns: Set<String>) -> Bool {
        if patterns.contains(mediaType) || patterns.contains("*/*") { return true }
        let parts = mediaType.split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return false }
        if patterns.contains("\(parts[0])/*") { return true }
        if let plus = parts[1].lastIndex(of: "+"), patterns.contains("*/*\(parts[1][plus...])") { return true }
        return false
    }
}

/// Status codes and methods for which an empty body is a valid answer (RFC 9110 sections
/// 9.3.2, 15.3.5 and 15.3.6): 204, 205 and any response to `HEAD`.
enum EmptyBody {
    static let statusCodes: Set<Int> = [204, 205]

    static func isAllowed(for response: RawResponse) -> Bool {
        statusCodes.contains(response.status.code) || response.request.method == .head
    }
}
