import CCurlShim
import CourierCore
import CourierTransport
import Foundation

extension CourierError {
    /// Maps a libcurl result code to the `CourierError` case a caller can act on.
    ///
    /// `detail` is libcurl's own message from `CURLOPT_ERRORBUFFER` when it wrote one
    /// (libcurl-errors(3) lists the codes). `stage` tells apart the codes libcurl also uses for
    /// a reply it cannot read.
    /// What went wrong in TLS, in words that say which check failed, with libcurl's own after
    /// them.
    ///
    /// `verifyResult` is `CURLINFO_SSL_VERIFYRESULT`: which check of the server's certificate
    /// failed, in the TLS library's own numbers (``CertificateProblem``); libcurl's words
    /// (OpenSSL's and GnuTLS's differ) are the fallback.
    static func tlsMessage(_ code: CURLcode, _ text: String, host: String?, verifyResult: Int = 0) -> String {
        let server = host.map { "\($0)'s" } ?? "The server's"
        let lower = text.lowercased()
        let what: String
        let problem = CertificateProblem(verifyResult: verifyResult, library: CurlRuntime.tlsLibrary)
        if code == CURLE_SSL_PINNEDPUBKEYNOTMATCH {
            what = "\(server) public key matches none of the pins for it"
        } else if let problem {
            switch problem {
            case .expired: what = "\(server) certificate has expired"
            case .notYetValid: what = "\(server) certificate is not valid yet"
            case .otherHost: what = "\(server) certificate is for another host name"
            case .untrusted: what = "\(server) certificate is not signed by a trusted certificate authority"
            }
        } else if lower.contains("certificate has expired") {
            what = "\(server) certificate has expired"
        } else if lower.contains("certificate is not yet valid") {
            what = "\(server) certificate is not valid yet"
        } else if lower.contains("subject name") || lower.contains("does not match target host") {
            what = "\(server) certificate is for another host name"
        } else if lower.contains("unable to get local issuer") || lower.contains("self-signed certificate")
            || lower.contains("self signed certificate") || lower.contains("unable to get issuer")
        {
            what = "\(server) certificate is not signed by a trusted certificate authority"
        } else if lower.contains("protocol version") || lower.contains("unsupported protocol")
            || lower.contains("no protocols available")
        {
            what = "The server and the client have no TLS version in common"
        } else if code == CURLE_SSL_CERTPROBLEM
            || (code == CURLE_SSL_CONNECT_ERROR && lower.contains("x.509") && lower.contains("key file"))
        {
            // GnuTLS builds: "error reading X.509 potentially-encrypted key file", as a
            // connection error.
            what = "The client certificate or its key cannot be used (a wrong password, or not PEM or PKCS#12)"
        } else if code == CURLE_SSL_CACERT_BADFILE {
            what = "The CA certificates to trust cannot be read"
        } else {
            what = "TLS failure"
        }
        return "\(what): \(text)"
    }

    /// Which check of the server's certificate failed, from libcurl's verification result.
    enum CertificateProblem {
        case expired, notYetValid, otherHost, untrusted

        /// nil when `verifyResult` names none of these (or the TLS library is another).
        init?(verifyResult: Int, library: CurlRuntime.TLSLibrary) {
            guard verifyResult != 0 else { return nil }
            switch library {
            case .openSSL:
                // X509_V_ERR_*: 9 not yet valid, 10 expired, 62 host name mismatch; 2, 18, 19,
                // 20 and 21 an issuer that is missing or not trusted.
                switch verifyResult {
                case 10: self = .expired
                case 9: self = .notYetValid
                case 62: self = .otherHost
                case 2, 18, 19, 20, 21: self = .untrusted
                default: return nil
                }
            case .gnuTLS:
                // gnutls_certificate_status_t bits: EXPIRED 1<<10, NOT_ACTIVATED 1<<9,
                // UNEXPECTED_OWNER 1<<14, SIGNER_NOT_FOUND 1<<6, SIGNER_NOT_CA 1<<7.
                if verifyResult & (1 << 10) != 0 {
                    self = .expired
                } else if verifyResult & (1 << 9) != 0 {
                    self = .notYetValid
                } else if verifyResult & (1 << 14) != 0 {
                    self = .otherHost
                } else if verifyResult & (1 << 6 | 1 << 7) != 0 {
                    self = .untrusted
                } else {
                    return nil
                }
            case .other:
                return nil
            }
        }
    }

    static func fromCurl(
        _ code: CURLcode, detail: String, context: Context, stage: ResponseStage = .other, verifyResult: Int = 0
    ) -> CourierError {
        var context = context
        context.curlCode = Int(code.rawValue)
        let text = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        switch code {
        case CURLE_UNSUPPORTED_PROTOCOL where stage.isReadingHead:
            // libcurl's code for a first line it cannot read as an HTTP status line ("Received
            // HTTP/0.9 when not allowed", "Unsupported HTTP version in response"); before the
            // request goes out, the same code means a URL scheme it refuses.
            context.message = "The server's status line is not HTTP: \(text)"
            return .invalidResponse(context)
        case _ where stage.isReadingHead && (code == CURLE_OUT_OF_MEMORY || courier_is_too_large_error(code)):
            // libcurl keeps each header line in a buffer of CURL_MAX_HTTP_HEADER bytes and
            // reports a longer line as out of memory (CURLE_TOO_LARGE from 8.6).
            context.message =
                "A line of the response head is longer than libcurl's limit of \(CURL_MAX_HTTP_HEADER) bytes"
            return .invalidResponse(context)
        case CURLE_FILESIZE_EXCEEDED where stage == .readingHead(sawContentLength: false):
            // With a size limit set, libcurl refuses a Content-Length beyond 64 bits this way as
            // it reads the line, before Courier sees it; a declared length over the limit it
            // refuses at the end of the head, after Courier has read the line.
            context.message = "The response's Content-Length is not a valid length: more than 64 bits"
            return .invalidResponse(context)
        case CURLE_RECV_ERROR where stage == .readingChunkedBody(systemError: 0, overTLS: false):
            // A failure to receive with no system error behind it, on a plain connection whose
            // response is chunked: libcurl could not read the chunked framing (its words for it
            // change between versions; a reset or a closed socket sets an error number).
            context.message = "Malformed chunked encoding: \(Self.trimmed(text))"
            return .invalidResponse(context)
        case CURLE_RECV_ERROR where detail.hasSuffix(Self.chunkedEncodingSuffix):
            // Over TLS, where a peer's abrupt close sets no error number either: libcurl 7.x's
            // words for a chunk size line it cannot read, e.g. "Illegal or missing hexadecimal
            // sequence in chunked-encoding".
            context.message = "Malformed chunked encoding: \(Self.trimmed(text))"
            return .invalidResponse(context)
        case CURLE_BAD_FUNCTION_ARGUMENT where stage == .loadingClientIdentity:
            // libcurl 8.16 on: a client key it cannot load (a wrong password) fails the
            // connection with this code, 8.15 and before with CURLE_SSL_CERTPROBLEM.
            context.message = Self.tlsMessage(CURLE_SSL_CERTPROBLEM, text, host: context.url?.host)
            return .tls(context)
        case CURLE_UNSUPPORTED_PROTOCOL:
            context.message = "Unsupported scheme: \(text)"
            return .unsupportedScheme(context)
        case CURLE_URL_MALFORMAT:
            context.message = "Malformed URL: \(text)"
            return .invalidURL(context)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            context.message = "Cannot resolve host: \(text)"
            return .cannotResolveHost(context)
        case CURLE_COULDNT_CONNECT:
            context.message = "Cannot connect: \(text)"
            return .cannotConnect(context)
        case CURLE_OPERATION_TIMEDOUT:
            context.message = "Timed out: \(text)"
            return .timedOut(context)
        case CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR,
            CURLE_HTTP2_STREAM, CURLE_HTTP2:
            context.message = "Connection lost: \(text)"
            return .connectionLost(context)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
            CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_USE_SSL_FAILED:
            context.message = Self.tlsMessage(code, text, host: context.url?.host, verifyResult: verifyResult)
            return .tls(context)
        case _ where courier_is_client_certificate_error(code):
            context.message = Self.tlsMessage(code, text, host: context.url?.host)
            return .tls(context)
        case CURLE_TOO_MANY_REDIRECTS:
            context.message = "Too many redirects: \(text)"
            return .tooManyRedirects(context)
        case CURLE_FILESIZE_EXCEEDED:
            context.message = "Response too large: \(text)"
            return .responseTooLarge(context)
        case CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING:
            context.message = "Invalid response: \(text)"
            return .invalidResponse(context)
        case CURLE_WRITE_ERROR, CURLE_READ_ERROR:
            context.message = "File system: \(text)"
            return .fileSystem(context)
        default:
            context.message = "Transfer failed: \(text)"
            return .transport(context)
        }
    }

    /// How libcurl 7.x ends its messages about malformed chunked encoding.
    private static let chunkedEncodingSuffix = " in chunked-encoding"

    /// libcurl's words without the suffix it ends chunked-encoding messages with.
    private static func trimmed(_ text: String) -> String {
        text.hasSuffix(chunkedEncodingSuffix) ? String(text.dropLast(chunkedEncodingSuffix.count)) : text
    }

    /// How far the response had come when libcurl failed. Some of libcurl's codes mean a reply
    /// it cannot read once the request has gone out, and something else before.
    enum ResponseStage: Equatable {
        /// The request had not gone out, or the response head had arrived whole.
        case other
        /// The request had gone out and the head had not arrived whole. `sawContentLength`:
        /// Courier had read a valid `Content-Length` line of it.
        case readingHead(sawContentLength: Bool)
        /// The head had arrived whole, and said `Transfer-Encoding: chunked`. `systemError`:
        /// the error number libcurl saw (`CURLINFO_OS_ERRNO`, 0 for none); `overTLS`: the
        /// connection was https.
        case readingChunkedBody(systemError: Int, overTLS: Bool)
        /// Nothing had gone out, and the transfer presents a client certificate: libcurl was
        /// connecting, and loading it.
        case loadingClientIdentity

        /// Whether the request had gone out and the head had not arrived whole.
        var isReadingHead: Bool {
            if case .readingHead = self { return true }
            return false
        }
    }
}
