import Courier
import Foundation

// One GET of the URL given, its JSON reply read, what came back printed.
guard CommandLine.arguments.count == 2, let url = URL(string: CommandLine.arguments[1]) else {
    FileHandle.standardError.write(Data("usage: courier-consumer URL\n".utf8))
    exit(2)
}
let api = HTTPSessionManager(configuration: .ephemeral)
do {
    let response = try await api.request(
        .get, url.absoluteString, parameters: ["from": "consumer"], serializer: JSONResponseSerializer())
    let reply = response.value
    print("\(response.status.code) \(reply["method"].stringValue ?? "?") \(reply["query"].stringValue ?? "?")")
} catch {
    FileHandle.standardError.write(Data("courier-consumer: \(error)\n".utf8))
    exit(1)
}
