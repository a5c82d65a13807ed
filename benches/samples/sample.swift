import Foundation

/// A downloaded image together with the metadata needed to cache it.
struct CachedImage: Codable, Equatable {
    let url: URL
    let data: Data
    let etag: String?
    let fetchedAt: Date

    var isStale: Bool {
        Date().timeIntervalSince(fetchedAt) > ImageCache.maxAge
    }
}

enum ImageCacheError: Error, CustomStringConvertible {
    case invalidResponse(statusCode: Int)
    case decodingFailed
    case cancelled

    var description: String {
        switch self {
        case .invalidResponse(let code):
            return "server responded with HTTP \(code)"
        case .decodingFailed:
            return "the downloaded data is not an image"
        case .cancelled:
            return "the request was cancelled"
        }
    }
}

protocol ImageLoading {
    func load(_ url: URL) async throws -> CachedImage
}

/// Two-level (memory + disk) image cache.
///
/// Memory lookups are synchronous; disk and network lookups are async.
final class ImageCache: ImageLoading {
    static let maxAge: TimeInterval = 60 * 60 * 24 * 7
    static let shared = ImageCache()

    private let memory = NSCache<NSURL, NSData>()
    private let directory: URL
    private let session: URLSession
    private var inFlight: [URL: Task<CachedImage, Error>] = [:]
    private let lock = NSLock()

    init(session: URLSession = .shared, directory: URL? = nil) {
        self.session = session
        let base = FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask)[0]
        self.directory = directory ?? base.appendingPathComponent("images", isDirectory: true)
        try? FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true)
        memory.countLimit = 200
    }

    private func diskPath(for url: URL) -> URL {
        let name = url.absoluteString.data(using: .utf8)!.base64EncodedString()
            .replacingOccurrences(of: "/", with: "_")
        return directory.appendingPathComponent(name).appendingPathExtension("json")
    }

    func load(_ url: URL) async throws -> CachedImage {
        if let data = memory.object(forKey: url as NSURL) {
            return CachedImage(url: url, data: data as Data, etag: nil, fetchedAt: Date())
        }

        if let cached = readFromDisk(url), !cached.isStale {
            memory.setObject(cached.data as NSData, forKey: url as NSURL)
            return cached
        }

        lock.lock()
        if let existing = inFlight[url] {
            lock.unlock()
            return try await existing.value
        }
        let task = Task { try await self.fetch(url, etag: readFromDisk(url)?.etag) }
        inFlight[url] = task
        lock.unlock()

        defer {
            lock.lock()
            inFlight[url] = nil
            lock.unlock()
        }
        return try await task.value
    }

    private func fetch(_ url: URL, etag: String?) async throws -> CachedImage {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData)
        if let etag = etag {
            request.setValue(etag, forHTTPHeaderField: "If-None-Match")
        }

        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else {
            throw ImageCacheError.decodingFailed
        }

        switch http.statusCode {
        case 200..<300:
            let image = CachedImage(url: url, data: data, etag: http.value(forHTTPHeaderField: "ETag"), fetchedAt: Date())
            writeToDisk(image)
            memory.setObject(data as NSData, forKey: url as NSURL)
            return image
        case 304:
            guard var cached = readFromDisk(url) else { throw ImageCacheError.invalidResponse(statusCode: 304) }
            cached = CachedImage(url: url, data: cached.data, etag: cached.etag, fetchedAt: Date())
            writeToDisk(cached)
            return cached
        default:
            throw ImageCacheError.invalidResponse(statusCode: http.statusCode)
        }
    }

    private func readFromDisk(_ url: URL) -> CachedImage? {
        guard let data = try? Data(contentsOf: diskPath(for: url)) else { return nil }
        return try? JSONDecoder().decode(CachedImage.self, from: data)
    }

    private func writeToDisk(_ image: CachedImage) {
        do {
            let data = try JSONEncoder().encode(image)
            try data.write(to: diskPath(for: image.url), options: .atomic)
        } catch {
            // Disk caching is best effort; log and carry on.
            print("ImageCache: failed to write \(image.url.lastPathComponent): \(error)")
        }
    }

    /// Removes every cached file older than `maxAge`.
    @discardableResult
    func purgeStale() -> Int {
        let files = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
        var removed = 0
        for file in files where file.pathExtension == "json" {
            if let data = try? Data(contentsOf: file),
               let image = try? JSONDecoder().decode(CachedImage.self, from: data),
               image.isStale {
                try? FileManager.default.removeItem(at: file)
                removed += 1
            }
        }
        return removed
    }
}

extension ImageCache {
    /// Loads several images concurrently, ignoring individual failures.
    func loadAll(_ urls: [URL]) async -> [URL: CachedImage] {
        await withTaskGroup(of: (URL, CachedImage?).self) { group in
            for url in urls {
                group.addTask { (url, try? await self.load(url)) }
            }
            var results: [URL: CachedImage] = [:]
            for await (url, image) in group {
                results[url] = image
            }
            return results
        }
    }
}
