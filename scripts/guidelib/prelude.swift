// The names a reader of the guide assumes, for `scripts/guide --compile`: each entry starts with a
// `// name: NAME` line and is left out when the block declares that name itself. Values are
// placeholders: the blocks are type-checked, never run.

// name: User
struct User: Codable, Sendable {
    var id: Int
    var name: String
}

// name: NewUser
struct NewUser: Codable, Sendable {
    var name: String
}

// name: Settings
struct Settings: Codable, Sendable {
    var theme: String
}

// name: url
let url = URL(string: "https://api.example.com/v1/")!

// name: api
let api = HTTPSessionManager(baseURL: url)

// name: configuration
nonisolated(unsafe) var configuration = HTTPSessionConfiguration.default

// name: weather
let weather = WeatherAPI()

// name: show
func show(_ value: Any) {}

// name: write
func write(_ data: Data) {}

// name: userID
let userID = 42

// name: query
let query = "swift"

// name: data
let data = Data()

// name: thumbnail
let thumbnail = Data()

// name: secret
let secret = "secret"

// name: destination
let destination = URL(fileURLWithPath: "/tmp/file.bin")

// name: destinationURL
let destinationURL = URL(fileURLWithPath: "/tmp/file.bin")

// name: sourceURL
let sourceURL = URL(string: "https://files.example.com/big.iso")!

// name: reportURL
let reportURL = URL(fileURLWithPath: "/tmp/report.pdf")

// name: halfDownloaded
let halfDownloaded = URL(fileURLWithPath: "/tmp/half.iso")

// name: photoURL
let photoURL = URL(fileURLWithPath: "/tmp/photo.jpg")

// name: source
let source = URL(fileURLWithPath: "/tmp/upload.bin")

// name: archive
let archive = URL(fileURLWithPath: "/tmp/archive.tar")

// name: stateFile
let stateFile = URL(fileURLWithPath: "/tmp/resume.json")

// name: downloadsFolder
let downloadsFolder = URL(fileURLWithPath: "/tmp/downloads")

// name: folder
let folder = URL(fileURLWithPath: "/tmp/downloads")

// name: files
let files = HTTPSessionManager(
    baseURL: URL(string: "https://files.example.com/")!, configuration: .background(identifier: "com.example.files"))

// name: docker
let docker = HTTPSessionManager(configuration: .ephemeral)

// name: download
let download = api.downloadTask("files/big.iso", to: destinationURL)

// name: certURL
let certURL = URL(fileURLWithPath: "/etc/client.pem")

// name: certificateURL
let certificateURL = URL(fileURLWithPath: "/etc/client.pem")

// name: keyURL
let keyURL = URL(fileURLWithPath: "/etc/client.key")

// name: p12URL
let p12URL = URL(fileURLWithPath: "/etc/client.p12")

// name: tenantCA
let tenantCA = URL(fileURLWithPath: "/etc/tenants/7/ca.pem")

// name: tenantCert
let tenantCert = URL(fileURLWithPath: "/etc/tenants/7/client.pem")

// name: tenantKey
let tenantKey = URL(fileURLWithPath: "/etc/tenants/7/client.key")

// name: corporateCA
let corporateCA = URL(fileURLWithPath: "/etc/corporate/ca.pem")

// name: partnerCA
let partnerCA = URL(fileURLWithPath: "/etc/partner/ca.pem")

// name: p12
let p12 = URL(fileURLWithPath: "/etc/partner/client.p12")

// name: cookie
let cookie = Cookie(name: "session", value: "abc", domain: "api.example.com")

// name: stub
let stub = StubTransport()

// name: savedToken
let savedToken: BearerCredential? = nil

// name: tokenService
enum tokenService {
    static func refresh(using token: String?) async throws -> BearerCredential {
        BearerCredential(accessToken: "new")
    }
}

// name: keychain
enum keychain {
    static func password(for host: String) async -> String? { nil }
}

// name: pack
func pack(_ parameters: JSON?) throws(CourierError) -> Data { Data() }

// name: parser
nonisolated(unsafe) var parser = LineParser()
struct LineParser {
    mutating func feed(_ chunk: Data) {}
}

// name: logLines
let logLines: [String] = []

// name: fileNames
let fileNames: [String] = []

// name: bundleURL
let bundleURL = URL(fileURLWithPath: "/etc/ssl/company-ca.pem")

// name: handle
func handle(_ value: Any) {}

// name: report
func report(_ values: Any...) {}

// name: tracer
let tracer = NoOpTracer()

// name: sessionTracer
let sessionTracer = NoOpTracer()

// name: factory
let factory = NOOPMetricsHandler.instance

// name: sessionFactory
let sessionFactory = NOOPMetricsHandler.instance

// name: Client
// What swift-openapi-generator makes of an OpenAPI document with a `getStats` operation.
struct Client {
    init(serverURL: URL, transport: any ClientTransport) {}
    func getStats(path: Operations.getStats.Input.Path) async throws -> Operations.getStats.Output {
        .ok(.init(body: .json(.init(requests: 1))))
    }
}
enum Servers {
    enum Server1 {
        static func url() throws -> URL { URL(string: "https://api.example.com/v1")! }
    }
}
enum Components {
    enum Schemas {
        struct Stats: Codable, Hashable, Sendable {
            var requests: Int
        }
    }
}
enum Operations {
    enum getStats {
        struct Input {
            struct Path {
                var name: String
                init(name: String) { self.name = name }
            }
        }
        enum Output {
            struct Ok {
                enum Body {
                    case json(Components.Schemas.Stats)
                    var json: Components.Schemas.Stats { get throws { if case .json(let body) = self { body } } }
                }
                var body: Body
            }
            case ok(Ok)
            case undocumented(statusCode: Int, UndocumentedPayload)
            var ok: Ok {
                get throws {
                    guard case .ok(let response) = self else { throw CancellationError() }
                    return response
                }
            }
        }
    }
}

// name: csvURL
let csvURL = URL(fileURLWithPath: "/tmp/import.csv")

// name: prompt
let prompt: JSON = ["model": "small", "prompt": "Why is the sky blue?"]

// name: apiKey
let apiKey = "key"
