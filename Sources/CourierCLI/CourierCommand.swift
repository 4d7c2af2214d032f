import ArgumentParser
import Courier
import Foundation
import HTTPTypes

/// `courier [METHOD] URL [items...]`: an HTTPie-style client on Courier's public API.
@main
struct CourierCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "courier",
        abstract: "Send an HTTP request with Courier and print the response.",
        discussion: """
            Request items:
              Header:value     a request header
              name==value      a URL query parameter
              name=value       a string field of the JSON (default) or form body
              name:=json       a raw JSON field (number, boolean, array, object) of the JSON body
              name@file        a file, as a part of a multipart/form-data body
              @file            a file, as the whole body

            The method defaults to GET, or POST when there are body fields.
            Examples:
              courier httpbin.org/get page==2
              courier POST :8080/users name=Ben admin:=true X-Token:abc
              courier --form PUT example.com/profile name=Ben
              courier POST :8080/upload title=Holiday photo@beach.jpg
              courier --download example.com/big.iso --output big.iso
              courier --download --continue example.com/big.iso --output big.iso
              courier --cacert ca.pem --pin sha256//r8ud...= https://api.example.com/me
              courier --unix-socket /var/run/docker.sock localhost/containers/json
              courier wss://echo.example.com/chat    (lines of standard input go as messages)
            """,
        version: versionText)

    /// `--version`: Courier's, then the libcurl it runs on and that libcurl's features (HTTP3
    /// among them when it can speak HTTP/3).
    static var versionText: String {
        """
        courier \(CourierInfo.version)
        \(CourierInfo.libcurlDescription)
        Features: \(CourierInfo.libcurlFeatures.joined(separator: " "))
        """
    }

    @Argument(help: "[METHOD] URL [items...]", completion: .none)
    var arguments: [String] = []

    @Flag(name: .long, help: "Send body fields as application/x-www-form-urlencoded.")
    var form = false

    @Flag(name: .long, help: "Send body fields as JSON (the default).")
    var json = false

    @Flag(name: [.short, .long], help: "Print the request and response headers too.")
    var verbose = false

    @Flag(name: .long, help: "Exit with 3, 4 or 5 for 3xx, 4xx and 5xx responses.")
    var checkStatus = false

    @Option(name: .long, help: "Seconds without data before giving up.")
    var timeout: Double = 30

    @Flag(name: .long, help: "Do not follow redirects.")
    var noFollow = false

    @Flag(name: .long, help: "Do not verify TLS certificates.")
    var insecure = false

    @Option(name: .long, help: "A PEM file of CA certificates to trust, beside the system's.")
    var cacert: String?

    @Option(name: .long, help: "A client certificate: PEM, or PKCS#12 when it ends in .p12 or .pfx.")
    var cert: String?

    @Option(name: .long, help: "The private key of --cert (PEM).")
    var key: String?

    @Option(name: .long, help: "The password of --key, or of the PKCS#12 --cert.")
    var pass: String?

    @Option(
        name: .long,
        help:
            "A public-key pin for the URL's host: sha256//<base64 SHA-256 of the key's SubjectPublicKeyInfo>. Repeatable."
    )
    var pin: [String] = []

    @Option(name: .long, help: "The oldest TLS version accepted: 1.2 or 1.3.")
    var tlsMin: String?

    @Option(name: .long, help: "Connect to this Unix-domain socket instead of the URL's host.")
    var unixSocket: String?

    @Option(name: .long, help: "HOST:PORT:ADDRESS: connect to ADDRESS for HOST:PORT, without DNS. Repeatable.")
    var resolve: [String] = []

    @Flag(name: .long, help: "Ask for HTTP/2 (ALPN over TLS, Upgrade over plain HTTP).")
    var http2 = false

    @Flag(
        name: .long,
        help: "Try HTTP/3 first, fall back to TCP (https; needs a libcurl with HTTP3: see --version).")
    var http3 = false

    @Flag(name: .long, help: "HTTP/3 only, no fallback (https; needs a libcurl with HTTP3: see --version).")
    var http3Only = false

    @Flag(name: [.short, .long], help: "Download the body to a file, with a progress bar.")
    var download = false

    @Option(name: [.short, .long], help: "The file to download to (default: the URL's last component).")
    var output: String?

    @Flag(name: [.customShort("c"), .long], help: "Resume an interrupted download of --output.")
    var `continue` = false

    @Option(name: .long, help: "USER:PASSWORD for the server (Basic, sent with the first request).")
    var auth: String?

    @Option(name: .long, help: "A bearer token, sent as Authorization: Bearer TOKEN.")
    var bearer: String?

    @Flag(
        name: [.short, .long],
        help:
            "Send the login and password that ~/.netrc (or $NETRC) gives for the URL's host, when no --auth or --bearer is given."
    )
    var netrc = false

    @Option(name: .long, help: "As --netrc, with this file.")
    var netrcFile: String?

    @Option(
        name: .long, help: "Write the exchanges (redirects included) to FILE as a HAR 1.2 archive, secrets redacted.")
    var har: String?

    @Option(name: .long, help: "Send through this proxy, e.g. http://user:password@proxy.example:3128.")
    var proxy: String?

    @Option(
        name: .long,
        help: "Send from this local address (10.0.0.7, ::1) or network interface (eth1), as curl --interface.")
    var interface: String?

    @Option(
        name: .long,
        help:
            "Fail when the response body (decoded) is larger than N bytes, whether printed, streamed or downloaded (exit status 1)."
    )
    var maxSize: Int64?

    @Option(
        name: .long,
        help:
            "Retry a failed idempotent request up to N times (0 to 100): cannot connect, timed out, connection lost, and the statuses 408, 429, 500, 502, 503 and 504; backoff from 0.5 s up to 10 s a wait, or the server's Retry-After."
    )
    var retry = 0

    @Flag(name: .long, help: "Print the request that would be sent, and send nothing.")
    var offline = false

    @Option(
        name: .long,
        help:
            "WebSocket: after standard input ends, keep reading until the server has been quiet this many seconds, then close."
    )
    var wait: Double = 1

    @Option(
        name: .long,
        help: "Keep cookies, --auth and --bearer between runs under this name, for the URL's host.")
    var session: String?

    @Option(
        name: [.customShort("p"), .customLong("print")],
        help: "What to print: H request head, B request body, h response head, b response body (default b; -v: HBhb).")
    var printedParts: String?

    func validate() throws {
        if form && json { throw ValidationError("--form and --json exclude each other") }
        if [http2, http3, http3Only].filter({ $0 }).count > 1 {
            throw ValidationError("--http2, --http3 and --http3-only exclude each other")
        }
        if arguments.isEmpty { throw ValidationError("Missing URL") }
        // A day at most: a larger number (or inf, or nan) would not fit in a Duration.
        if !(timeout > 0 && timeout <= 86_400) {
            throw ValidationError("--timeout takes seconds: more than 0, at most 86400")
        }
        if (output != nil || `continue`) && !download {
            throw ValidationError("--output and --continue go with --download")
        }
        if key != nil && cert == nil { throw ValidationError("--key goes with --cert") }
        if let auth, Self.userAndPassword(auth) == nil { throw ValidationError("--auth takes USER:PASSWORD") }
        if auth != nil && bearer != nil { throw ValidationError("--auth and --bearer exclude each other") }
        if let maxSize, maxSize < 0 { throw ValidationError("--max-size takes a number of bytes, 0 or more") }
        if let proxy, Self.proxyURL(proxy) == nil {
            throw ValidationError("--proxy takes an http:// or https:// URL, not '\(proxy)'")
        }
        if !(0...100).contains(retry) { throw ValidationError("--retry takes 0 to 100") }
        if !(wait >= 0 && wait <= 86_400) { throw ValidationError("--wait takes seconds: 0 to 86400") }
        if let printedParts, PrintedParts(letters: printedParts) == nil {
            throw ValidationError("--print takes letters of HBhb, not '\(printedParts)'")
        }
        if offline && download { throw ValidationError("--offline sends nothing: not with --download") }
        if let tlsMin, Self.tlsVersion(tlsMin) == nil { throw ValidationError("--tls-min takes 1.2 or 1.3") }
        for line in resolve where Self.addressOverride(line) == nil {
            throw ValidationError("--resolve takes HOST:PORT:ADDRESS, not '\(line)'")
        }
    }

    /// `user:password` split at the first colon (the password may hold colons).
    static func userAndPassword(_ text: String) -> (user: String, password: String)? {
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    /// An http(s) URL with a host.
    static func proxyURL(_ text: String) -> URL? {
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
            url.host?.isEmpty == false
        else { return nil }
        return url
    }

    static func tlsVersion(_ text: String) -> TLSVersion? {
        switch text {
        case "1.2": .v1_2
        case "1.3": .v1_3
        default: nil
        }
    }

    /// `host:port:address` (the address may be an IPv6 one, with or without brackets).
    static func addressOverride(_ line: String) -> AddressOverride? {
        let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, let port = Int(parts[1]), !parts[2].isEmpty else { return nil }
        let address = parts[2].trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let override = AddressOverride.resolve(String(parts[0]), port: port, to: address)
        return override.isValid ? override : nil
    }

    /// `--interface`: an IP address is a source address, anything else an interface's name.
    static func source(_ text: String) -> SocketOptions.Source {
        let address = SocketOptions.Source.address(text)
        return address.isValidAddress ? address : .interface(text)
    }

    /// The session's TLS, socket and protocol choices from the options.
    func apply(to configuration: inout HTTPSessionConfiguration, host: String?, bearer: String?) {
        configuration.verifiesTLSCertificates = !insecure
        if let cacert { configuration.tls.certificateAuthorityFile = URL(fileURLWithPath: cacert) }
        if let cert {
            let certificate = URL(fileURLWithPath: cert)
            if ["p12", "pfx"].contains(certificate.pathExtension.lowercased()) {
                configuration.tls.clientIdentity = .pkcs12(certificate, password: pass)
            } else {
                configuration.tls.clientIdentity = .pem(
                    certificate: certificate, key: URL(fileURLWithPath: key ?? cert), password: pass)
            }
        }
        if !pin.isEmpty, let host { configuration.tls.pinnedPublicKeys[host] = pin }
        if let tlsMin { configuration.tls.minimumVersion = Self.tlsVersion(tlsMin) }
        configuration.unixSocketPath = unixSocket
        configuration.addressOverrides = resolve.compactMap(Self.addressOverride)
        if http2 { configuration.httpVersion = .http2 }
        if http3 { configuration.httpVersion = .http3WithFallback }
        if http3Only { configuration.httpVersion = .http3 }
        if let bearer { configuration.additionalHeaders["Authorization"] = "Bearer \(bearer)" }
        if let proxy { configuration.proxy = Self.proxyURL(proxy) }
        if let interface { configuration.socket.source = Self.source(interface) }
        // One command is one request: no budget shared across requests and no deadline stop
        // short of the N retries asked for.
        if retry > 0 {
            configuration.interceptors.append(RetryPolicy(maximumAttempts: retry + 1, deadline: nil, budget: nil))
        }
    }

    /// `login:password` from the netrc file (`file`, else `$NETRC`, else `~/.netrc`) for the
    /// URL's host, or its default entry; nil when neither has both.
    static func netrcCredential(file: String?, url: String) throws -> String? {
        let environment = ProcessInfo.processInfo.environment
        let path =
            file ?? environment["NETRC"]
            ?? URL(fileURLWithPath: environment["HOME"] ?? NSHomeDirectory()).appendingPathComponent(".netrc").path
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            // curl goes on without a credential when ~/.netrc is missing; a file named is needed.
            if file == nil { return nil }
            throw ValidationError("--netrc-file \(path) cannot be read")
        }
        let netrc: Netrc
        do {
            netrc = try Netrc(parsing: text)
        } catch {
            throw ValidationError("\(path): \(error)")
        }
        guard let host = URL(string: url)?.host, let entry = netrc.entry(for: host),
            let login = entry.login, let password = entry.password
        else { return nil }
        return "\(login):\(password)"
    }

    /// `--auth`'s credential in the manager's store, for the URL's origin: sent with the first
    /// request (Basic) and with any other request the command makes there.
    func storeCredential(_ auth: String?, in api: HTTPSessionManager, for url: String) throws {
        guard let auth, let (user, password) = Self.userAndPassword(auth) else { return }
        guard let target = URL(string: url), let space = ProtectionSpace(url: target) else {
            throw ValidationError("--auth needs a URL with a host, not '\(url)'")
        }
        api.credentials.set(Credential(user: user, password: password, sendsPreemptively: true), for: space)
    }

    func run() async throws {
        var invocation: Invocation
        do {
            invocation = try Invocation(arguments: arguments, form: form)
        } catch {
            throw ValidationError("\(error)")
        }
        if let maxSize { invocation.options.maximumResponseSize = maxSize }
        // --session: what the last run kept, with this run's --auth or --bearer in its place.
        var kept: (file: URL, session: CLISession)?
        // The credential this run sends: its own, else the session's unless that one was given
        // over https and this request would carry it in clear.
        var (auth, bearer) = (self.auth, self.bearer)
        if auth == nil, bearer == nil, netrc || netrcFile != nil {
            auth = try Self.netrcCredential(file: netrcFile, url: invocation.url)
        }
        if let session {
            let file = try CLISession.file(name: session, url: invocation.url)
            var stored = try CLISession.load(from: file)
            let scheme = URL(string: invocation.url)?.scheme?.lowercased()
            if let auth { (stored.auth, stored.bearer, stored.credentialScheme) = (auth, nil, scheme) }
            if let bearer { (stored.auth, stored.bearer, stored.credentialScheme) = (nil, bearer, scheme) }
            if stored.auth != nil || stored.bearer != nil {
                if let url = URL(string: invocation.url), stored.credentialMayGo(to: url) {
                    (auth, bearer) = (stored.auth, stored.bearer)
                } else {
                    FileHandle.standardError.write(
                        Data(
                            ("courier: --session \(session): its credential was given over https and is not "
                                + "sent over http\n").utf8))
                }
            }
            kept = (file, stored)
        }
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.requestTimeout = .milliseconds(Int(timeout * 1000))
        configuration.followsRedirects = !noFollow
        apply(to: &configuration, host: URL(string: invocation.url)?.host, bearer: bearer)
        if offline { configuration.interceptors.append(OfflineInterceptor()) }
        if let har { configuration.eventMonitors.append(HARRecorder(file: URL(fileURLWithPath: har))) }
        let api = HTTPSessionManager(configuration: configuration)
        try storeCredential(auth, in: api, for: invocation.url)
        await kept?.session.restoreCookies(into: api)
        do {
            try await send(invocation, with: api, auth: auth)
        } catch {
            try await keep(&kept, of: api)
            throw error
        }
        try await keep(&kept, of: api)
    }

    /// Writes the session file with the cookies `api` has now (nothing without `--session`).
    func keep(_ kept: inout (file: URL, session: CLISession)?, of api: HTTPSessionManager) async throws {
        guard let file = kept?.file, var session = kept?.session else { return }
        await session.keepCookies(of: api)
        try session.save(to: file)
        kept = (file, session)
    }

    /// Sends the request (or, `--offline`, prints it) and prints the answer; `auth` is the
    /// credential in use, from the command line or the session.
    func send(_ invocation: Invocation, with api: HTTPSessionManager, auth: String?) async throws {
        if WebSocketChat.isWebSocketURL(invocation.url) {
            if download || offline { throw ValidationError("--download and --offline are for HTTP, not WebSockets") }
            do {
                try await WebSocketChat(
                    api: api, invocation: invocation, verbose: verbose, quietPeriod: .milliseconds(Int(wait * 1000))
                ).run()
            } catch let error as CourierError {
                TerminalOutput().printError(error)
                throw ExitCode(Self.exitCode(for: error))
            }
            return
        }
        if download {
            try await Downloader(api: api, invocation: invocation, output: output, resumes: `continue`).run()
            return
        }
        var output = TerminalOutput()
        output.parts = printedParts.flatMap(PrintedParts.init(letters:)) ?? (verbose ? .everything : .body)
        do {
            let uploads: Bool
            if case .file = invocation.body {
                uploads = true
            } else if case .multipart = invocation.body {
                uploads = true
            } else {
                uploads = false
            }
            if offline {
                var request = try await OfflineInterceptor.request(of: invocation, with: api)
                // libcurl adds --auth's header when it sends; shown here as it would go.
                if let auth {
                    request.headerFields[.authorization] = "Basic " + Data(auth.utf8).base64EncodedString()
                }
                output.parts = PrintedParts(requestHead: true, requestBody: true)
                output.printRequest(request, body: invocation.bodyDescription)
                return
            }
            if !uploads, output.parts == .body {
                try await streamBody(of: invocation, with: api, to: output)
                return
            }
            let response = try await invocation.send(
                with: api, progress: uploads ? ProgressDisplay() : nil,
                failing: retry > 0 ? RetryPolicy.transientStatusCodes : [])
            if output.parts.printsRequest { output.printRequest(response.request, body: invocation.bodyDescription) }
            output.printResponse(response)
            if checkStatus, let code = Self.exitCode(for: response.status) {
                throw ExitCode(code)
            }
        } catch let error as CourierError {
            if case .unacceptableStatusCode(let context) = error, let response = context.response {
                // A status the request did not accept (a streamed body's, or the last answer once
                // --retry's attempts are spent): shown as any response.
                output.printResponse(response, body: context.body ?? Data(), httpVersion: "")
                if checkStatus, let code = Self.exitCode(for: response.status) { throw ExitCode(code) }
                return
            }
            output.printError(error)
            throw ExitCode(Self.exitCode(for: error))
        }
    }

    /// The most of a JSON body gathered to be indented; a larger one is written as it comes.
    static let formattingLimit = 16 << 20

    /// A request without a file to upload whose response body alone is printed goes as a byte
    /// stream, written as it arrives (a model API's event stream is printed event by event):
    /// nothing but JSON needs the whole body. A JSON body (by its type, or by its first byte when the
    /// type says nothing) is gathered to be indented, up to `formattingLimit`; past that, what
    /// was gathered and the rest go out as they are. Binary bodies on a terminal are not
    /// shown. A status outside 200..<300 throws `unacceptableStatusCode` with the start of the
    /// body, printed by the caller.
    func streamBody(of invocation: Invocation, with api: HTTPSessionManager, to output: TerminalOutput) async throws {
        let (head, body): (HTTPResponse, ByteStream)
        if case .data(let data) = invocation.body {
            (head, body) = try await api.stream(
                invocation.method, invocation.url, body: .data(data), headers: invocation.headers,
                options: invocation.options)
        } else {
            (head, body) = try await api.stream(
                invocation.method, invocation.url, headers: invocation.headers, options: invocation.options)
        }
        let type = head.headerFields[.contentType]?.lowercased() ?? ""
        var gathered: Data?
        var lastByte: UInt8?
        for try await chunk in body {
            if lastByte == nil, gathered == nil {
                let startsJSON = chunk.first == UInt8(ascii: "{") || chunk.first == UInt8(ascii: "[")
                if TerminalOutput.isJSONType(type) || (type.isEmpty && startsJSON) {
                    gathered = Data()
                } else if isatty(STDOUT_FILENO) != 0, chunk.contains(0) {
                    FileHandle.standardOutput.write(Data("+-- NOTE: binary data not shown --+\n".utf8))
                    return
                }
            }
            if var data = gathered {
                gathered = nil  // one copy of the buffer while it grows
                data.append(chunk)
                if data.count <= Self.formattingLimit {
                    gathered = data
                    continue
                }
                FileHandle.standardOutput.write(data)
                lastByte = data.last
                continue
            }
            FileHandle.standardOutput.write(chunk)
            lastByte = chunk.last ?? lastByte
        }
        if let gathered {
            output.printResponse(head, body: gathered, httpVersion: "")
        } else if let lastByte, lastByte != UInt8(ascii: "\n") {
            FileHandle.standardOutput.write(Data("\n".utf8))
        }
    }

    /// HTTPie's codes: 3, 4 and 5 for 3xx, 4xx and 5xx under `--check-status`.
    static func exitCode(for status: HTTPResponse.Status) -> Int32? {
        switch status.code {
        case 300..<400: 3
        case 400..<500: 4
        case 500..<600: 5
        default: nil
        }
    }

    /// 2 for timeouts, 6 for too many redirects, 1 otherwise (HTTPie's codes).
    static func exitCode(for error: CourierError) -> Int32 {
        switch error {
        case .timedOut: 2
        case .tooManyRedirects: 6
        default: 1
        }
    }
}
