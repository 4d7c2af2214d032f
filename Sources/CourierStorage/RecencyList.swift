/// Keys in the order they were last used, least recently used first: the order `HTTPCache`
/// evicts in, from disk and from memory.
///
/// A doubly linked list threaded through an array of nodes, with a dictionary from each key to
/// its node, so that using a key (moving it to the newest end), removing it and finding the
/// oldest cost O(1) whatever the count: a scan for the oldest on every eviction made storing
/// into a full cache cost in proportion to its size. Freed nodes are reused, so the array
/// stays as long as the most keys ever held at once.
struct RecencyList<Key: Hashable> {
    fileprivate struct Node {
        var key: Key
        var older: Int
        var newer: Int
    }

    /// Where no node is linked (the ends' outer neighbours, an empty list's ends).
    private static var none: Int { -1 }

    private var nodes: [Node] = []
    private var freeNodes: [Int] = []
    private var positions: [Key: Int] = [:]
    private var oldestNode = none
    private var newestNode = none

    /// How many keys the list holds.
    var count: Int { positions.count }

    /// Whether the list holds `key`.
    func contains(_ key: Key) -> Bool { positions[key] != nil }

    /// The least recently used key, the next to evict.
    var oldest: Key? { oldestNode == Self.none ? nil : nodes[oldestNode].key }

    /// The keys from the least recently used to the most.
    var keysFromOldest: [Key] {
        var keys: [Key] = []
        keys.reserveCapacity(count)
        var node = oldestNode
        while node != Self.none {
            keys.append(nodes[node].key)
            node = nodes[node].newer
        }
        return keys
    }

    /// Makes `key` the most recently used, adding it if the list does not hold it.
    mutating func use(_ key: Key) {
        if let node = positions[key] {
            guard node != newestNode else { return }
            unlink(node)
            append(node)
            return
        }
        let node: Int
        if let free = freeNodes.popLast() {
            nodes[free] = Node(key: key, older: Self.none, newer: Self.none)
            node = free
        } else {
            nodes.append(Node(key: key, older: Self.none, newer: Self.none))
            node = nodes.count - 1
        }
        positions[key] = node
        append(node)
    }

    /// Takes `key` out of the list; false if it was not there.
    @discardableResult
    mutating func remove(_ key: Key) -> Bool {
        guard let node = positions.removeValue(forKey: key) else { return false }
        unlink(node)
        freeNodes.append(node)
        return true
    }

    /// Takes the least recently used key out of the list and returns it.
    mutating func removeOldest() -> Key? {
        guard let key = oldest else { return nil }
        remove(key)
        return key
    }

    /// Empties the list, keeping no storage.
    mutating func removeAll() { self = RecencyList() }

    /// Links `node` at the newest end.
    private mutating func append(_ node: Int) {
        nodes[node].older = newestNode
        nodes[node].newer = Self.none
        if newestNode == Self.none { oldestNode = node } else { nodes[newestNode].newer = node }
        newestNode = node
    }

    /// Unlinks `node` from its neighbours (it stays in `positions`).
    private mutating func unlink(_ node: Int) {
        let (older, newer) = (nodes[node].older, nodes[node].newer)
        if older == Self.none { oldestNode = newer } else { nodes[older].newer = newer }
        if newer == Self.none { newestNode = older } else { nodes[newer].older = older }
    }
}

extension RecencyList: Sendable where Key: Sendable {}
extension RecencyList.Node: Sendable where Key: Sendable {}
