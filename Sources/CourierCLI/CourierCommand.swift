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
            """,
        version: CourierInfo.version)

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

    @Flag(name: [.short, .long], help: "Download the body to a file, with a progress bar.")
    var download = false

    @Option(name: [.short, .long], help: "The file to download to (default: the URL's last component).")
    var output: String?

    @Flag(name: [.customShort("c"), .long], help: "Resume an interrupted download of --output.")
    var `continue` = false

    func validate() throws {
        if form && json { throw ValidationError("--form and --json exclude each other") }
        if arguments.isEmpty { throw ValidationError("Missing URL") }
        // A day at most: a larger number (or inf, or nan) would not fit in a Duration.
        if !(timeout > 0 && timeout <= 86_400) {
            throw ValidationError("--timeout takes seconds: more than 0, at most 86400")
        }
        if (output != nil || `continue`) && !download {
            throw ValidationError("--output and --continue go with --download")
        }
    }

    func run() async throws {
        let invocation: Invocation
        do {
            invocation = try Invocation(arguments: arguments, form: form)
        } catch {
            throw ValidationError("\(error)")
        }
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.requestTimeout = .milliseconds(Int(timeout * 1000))
        configuration.followsRedirects = !noFollow
        configuration.verifiesTLSCertificates = !insecure
        let api = HTTPSessionManager(configuration: configuration)
        if download {
            try await Downloader(api: api, invocation: invocation, output: output, resumes: `continue`).run()
            return
        }
        let output = TerminalOutput()
        do {
            let uploads: Bool
            if case .file = invocation.body {
                uploads = true
            } else if case .multipart = invocation.body {
                uploads = true
            } else {
                uploads = false
            }
            let response = try await invocation.send(with: api, progress: uploads ? ProgressDisplay() : nil)
            if verbose { output.printRequest(response.request, body: invocation.bodyDescription) }
            output.printResponse(response, verbose: verbose)
            if checkStatus, let code = Self.exitCode(for: response.status) {
                throw ExitCode(code)
            }
        } catch let error as CourierError {
            output.printError(error)
            throw ExitCode(Self.exitCode(for: error))
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
