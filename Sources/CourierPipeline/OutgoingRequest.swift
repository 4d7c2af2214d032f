import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes

/// The request as it goes out, for the HTTP cache: the pipeline's request (adapted, upgraded
/// to https by HSTS) with what the transport adds below the pipeline, the session's cookies and
/// the `Authorization` a credential makes.
///
/// The cache must judge the request that is sent, not the one the caller wrote (RFC 9111): a
/// response to a request with credentials is not stored for others unless it says it may be
/// (section 3.5), and `Vary: Cookie` or `Vary: Authorization` compares the values that went
/// out (section 4.1). libcurl writes both fields itself, so the cache sees stand-ins: the
/// `Cookie` header the jar gives for the URL, and for a credential a value that tells one
/// credential from another without carrying the password into the cache's files.
enum OutgoingRequest {
    /// What the transport will add to one request.
    struct Additions {
        /// Where the cookies come from; nil when the request sends none.
        var cookies: (any CookieJarHost)?
        /// The credential for the request's origin (the call's, the URL's, or the store's).
        var credential: Credential?

        /// `request` as it goes out: with the jar's `Cookie` header unless it has one of its
        /// own, and the credential's stand-in `Authorization` unless it has one.
        func applied(to request: HTTPRequest, urlString: String) -> HTTPRequest {
            var outgoing = request
            if let cookies, request.headerFields[.cookie] == nil, let header = cookies.cookieHeader(for: urlString) {
                outgoing.headerFields[.cookie] = header
            }
            if let credential, request.headerFields[.authorization] == nil {
                outgoing.headerFields[.authorization] = authorizationStandIn(for: credential)
            }
            return outgoing
        }
    }

    /// Stands for the `Authorization` that `credential` makes, in the cache only: a hash of the
    /// user and password salted for this process, so that two credentials differ and neither
    /// the password nor the user is in what the cache keeps (an entry stored under one is
    /// revalidated by the next process, which cannot match the stand-in).
    static func authorizationStandIn(for credential: Credential) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ salt  // FNV-1a
        for byte in Array(credential.user.utf8) + [0] + Array(credential.password.utf8) {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return "Courier-Credential \(String(hash, radix: 16))"
    }

    private static let salt = UInt64.random(in: .min ... .max)
}
