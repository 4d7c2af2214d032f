@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes

/// The keys that sign a request for AWS: an access key and its secret, and the session token
/// that temporary credentials (STS, an instance role) come with.
public struct AWSCredentials: Sendable, Hashable {
    /// The access key ID (`AKIA...`, `ASIA...`).
    public var accessKeyID: String
    /// The secret access key.
    public var secretAccessKey: String
    /// The session token of temporary credentials, sent as `X-Amz-Security-Token`.
    public var sessionToken: String?

    /// Credentials from their parts.
    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }
}

/// Signs each request with AWS Signature Version 4, as S3, OpenSearch, API Gateway and every
/// other AWS API ask: an interceptor that adds `X-Amz-Date` (and `X-Amz-Security-Token` with
/// temporary credentials) and the `Authorization` header.
///
/// ```swift
/// var configuration = HTTPSessionConfiguration.default
/// configuration.interceptors.append(
///     AWSSigV4Signer(region: "eu-west-1", service: "es",
///                    credentials: AWSCredentials(accessKeyID: key, secretAccessKey: secret)))
/// let api = HTTPSessionManager(baseURL: URL(string: "https://search-logs.eu-west-1.es.amazonaws.com/")!,
///                              configuration: configuration)
/// ```
///
/// The body is part of the signature: its SHA-256 is computed from memory or read from its
/// file. A body streamed from an `AsyncSequence`, or compressed on the way out, is signed as
/// `UNSIGNED-PAYLOAD` (with `X-Amz-Content-SHA256` saying so), which S3 accepts and most other
/// services do not: give them a body in memory or in a file. The signature covers `Host` and
/// every field the request has when the signer adapts it, except `User-Agent`, `Expect` and
/// `X-Amzn-Trace-Id` (which proxies rewrite): add it last among the interceptors, and change no
/// field after it. Each attempt is signed anew (a retry gets a new date).
public struct AWSSigV4Signer: RequestInterceptor {
    /// The region (`us-east-1`).
    public var region: String
    /// The service's signing name (`s3`, `es`, `execute-api`, `sts`).
    public var service: String
    /// Remove `.` and `..` segments and repeated slashes from the path before signing, as every
    /// service but S3 expects. Default: true except for `s3`.
    public var normalizesPath: Bool
    /// Percent-encode the path as sent once more for the canonical request, as every service
    /// but S3 expects (S3 signs the path as it is sent). Default: true except for `s3`.
    public var encodesPath: Bool
    /// Send the payload's hash as `X-Amz-Content-SHA256` (signed), as S3 requires. Default: true
    /// for `s3`.
    public var sendsPayloadHash: Bool
    private let credentials: @Sendable () async throws -> AWSCredentials
    /// The signing time; the clock by default (tests pin it).
    package var clock: @Sendable () -> Date = { Date() }

    /// A signer with fixed credentials.
    public init(region: String, service: String, credentials: AWSCredentials) {
        self.init(region: region, service: service) { credentials }
    }

    /// A signer that asks `credentials` for the keys before each attempt (temporary credentials
    /// that a provider renews).
    public init(
        region: String, service: String, credentials: @escaping @Sendable () async throws -> AWSCredentials
    ) {
        self.region = region
        self.service = service
        self.credentials = credentials
        let s3 = service.lowercased() == "s3"
        normalizesPath = !s3
        encodesPath = !s3
        sendsPayloadHash = s3
    }

    /// Signs `request`.
    public func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
        let credentials = try await credentials()
        let payloadHash = try Self.payloadHash(of: context.body)
        return signed(request, credentials: credentials, payloadHash: payloadHash, date: clock()).request
    }

    /// What signing `request` makes: the signed request, and the canonical request and the
    /// string to sign on the way (AWS's test suite checks each).
    package func signed(
        _ request: HTTPRequest, credentials: AWSCredentials, payloadHash: String, date: Date
    ) -> (request: HTTPRequest, canonicalRequest: String, stringToSign: String) {
        var request = request
        let (amzDate, day) = Self.timestamps(date)
        request.headerFields[.authorization] = nil
        request.headerFields[Self.amzDate] = amzDate
        if let token = credentials.sessionToken { request.headerFields[Self.securityToken] = token }
        if sendsPayloadHash || payloadHash == Self.unsignedPayload {
            request.headerFields[Self.contentSHA256] = payloadHash
        }
        let (canonicalHeaders, signedHeaders) = Self.canonicalHeaders(of: request)
        let canonicalRequest = [
            request.method.rawValue, canonicalPath(request.path ?? "/"), Self.canonicalQuery(request.path ?? ""),
            canonicalHeaders, signedHeaders, payloadHash,
        ].joined(separator: "\n")
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            "AWS4-HMAC-SHA256", amzDate, scope, SHA256.hex(SHA256.hash(Array(canonicalRequest.utf8))),
        ].joined(separator: "\n")
        var key = SHA256.hmac(key: Array(("AWS4" + credentials.secretAccessKey).utf8), Array(day.utf8))
        for part in [region, service, "aws4_request"] { key = SHA256.hmac(key: key, Array(part.utf8)) }
        let signature = SHA256.hex(SHA256.hmac(key: key, Array(stringToSign.utf8)))
        request.headerFields[.authorization] =
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedHeaders), Signature=\(signature)"
        return (request, canonicalRequest, stringToSign)
    }

    static let amzDate = HTTPField.Name("X-Amz-Date")!
    static let securityToken = HTTPField.Name("X-Amz-Security-Token")!
    static let contentSHA256 = HTTPField.Name("X-Amz-Content-SHA256")!
    /// The payload hash of a body that is not hashed.
    static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// Fields left out of the signature: intermediaries add or rewrite them.
    static let unsignedFields: Set<String> = ["user-agent", "expect", "x-amzn-trace-id", "authorization"]

    /// `20150830T123600Z` and `20150830`, in UTC.
    static func timestamps(_ date: Date) -> (String, String) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func two(_ value: Int?) -> String { value.map { $0 < 10 ? "0\($0)" : "\($0)" } ?? "00" }
        let day = "\(parts.year ?? 1970)\(two(parts.month))\(two(parts.day))"
        return ("\(day)T\(two(parts.hour))\(two(parts.minute))\(two(parts.second))Z", day)
    }

    /// The hex SHA-256 of what `body` sends; `UNSIGNED-PAYLOAD` for a stream or a compressed
    /// body.
    static func payloadHash(of body: RequestBody?) throws -> String {
        guard let body else { return SHA256.hex(SHA256.hash([UInt8]())) }
        if body.compressed { return unsignedPayload }
        var hasher = SHA256()
        func hashFile(_ path: String, offset: Int64, length: Int64) throws {
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw CourierError.fileSystem(.init(message: "The body file \(path) cannot be read to sign it"))
            }
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(offset))
            var left = length
            while left > 0 {
                let chunk = handle.readData(ofLength: Int(min(left, 1 << 20)))
                guard !chunk.isEmpty else { break }
                hasher.update(chunk)
                left -= Int64(chunk.count)
            }
        }
        switch body.content {
        case .data(let data): hasher.update(data)
        case .file(let path, let length): try hashFile(path, offset: 0, length: length)
        case .stream: return unsignedPayload
        case .segments(let segments):
            for segment in segments {
                switch segment {
                case .data(let data): hasher.update(data)
                case .file(let path, let offset, let length): try hashFile(path, offset: offset, length: length)
                case .stream: return unsignedPayload
                }
            }
        }
        return SHA256.hex(hasher.finalize())
    }

    /// The path part of `target`, normalized and encoded as the service expects.
    func canonicalPath(_ target: String) -> String {
        var path = String(target.prefix { $0 != "?" })
        if path.isEmpty { path = "/" }
        if normalizesPath {
            var segments: [Substring] = []
            for segment in path.split(separator: "/", omittingEmptySubsequences: true) {
                if segment == "." { continue }
                if segment == ".." {
                    _ = segments.popLast()
                    continue
                }
                segments.append(segment)
            }
            let trailing = path.hasSuffix("/") && !segments.isEmpty
            path = "/" + segments.joined(separator: "/") + (trailing ? "/" : "")
        }
        guard encodesPath else { return path }
        return path.split(separator: "/", omittingEmptySubsequences: false).map { Self.encode(String($0)) }
            .joined(separator: "/")
    }

    /// The query of `target`: each name and value decoded, then encoded as AWS encodes, sorted.
    static func canonicalQuery(_ target: String) -> String {
        guard let mark = target.firstIndex(of: "?") else { return "" }
        let query = target[target.index(after: mark)...]
        var pairs: [(String, String)] = []
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            let value = parts.count > 1 ? String(parts[1]) : ""
            pairs.append(
                (encode(name.removingPercentEncoding ?? name), encode(value.removingPercentEncoding ?? value)))
        }
        pairs.sort {
            $0.0 == $1.0
                ? Array($0.1.utf8).lexicographicallyPrecedes(Array($1.1.utf8))
                : Array($0.0.utf8).lexicographicallyPrecedes(Array($1.0.utf8))
        }
        return pairs.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// The canonical header lines (each ending in a newline) and the signed header names.
    static func canonicalHeaders(of request: HTTPRequest) -> (String, String) {
        var values: [String: [String]] = [:]
        if let authority = request.authority { values["host"] = [authority] }
        for field in request.headerFields {
            let name = field.name.canonicalName
            guard !unsignedFields.contains(name), name != "host" || request.authority == nil else { continue }
            let collapsed = field.value.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })
                .joined(separator: " ")
            values[name, default: []].append(collapsed)
        }
        let names = values.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        let lines = names.map { "\($0):\(values[$0]!.joined(separator: ","))\n" }.joined()
        return (lines, names.joined(separator: ";"))
    }

    /// Percent-encodes every byte but the unreserved ones (`A-Z a-z 0-9 - _ . ~`), upper-case hex.
    static func encode(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
