<?php

declare(strict_types=1);

namespace App\Http\Controllers;

use App\Models\Article;
use App\Services\SlugGenerator;
use InvalidArgumentException;
use Psr\Log\LoggerInterface;

/**
 * Handles CRUD operations for blog articles.
 *
 * @package App\Http\Controllers
 */
final class ArticleController
{
    private const PER_PAGE = 15;
    private const ALLOWED_STATUSES = ['draft', 'review', 'published'];

    public function __construct(
        private readonly ArticleRepository $articles,
        private readonly SlugGenerator $slugs,
        private readonly LoggerInterface $logger,
    ) {
    }

    /**
     * List published articles, newest first.
     *
     * @param array<string, mixed> $query
     * @return array{items: list<array<string, mixed>>, page: int, total: int}
     */
    public function index(array $query): array
    {
        $page = max(1, (int) ($query['page'] ?? 1));
        $tag = isset($query['tag']) ? trim((string) $query['tag']) : null;

        $result = $this->articles->paginate(
            status: 'published',
            tag: $tag ?: null,
            offset: ($page - 1) * self::PER_PAGE,
            limit: self::PER_PAGE,
        );

        return [
            'items' => array_map(fn (Article $a): array => $this->present($a), $result->items),
            'page' => $page,
            'total' => $result->total,
        ];
    }

    public function store(array $input, int $authorId): array
    {
        $errors = $this->validate($input);
        if ($errors !== []) {
            return ['status' => 422, 'errors' => $errors];
        }

        $article = new Article();
        $article->title = $input['title'];
        $article->body = $input['body'];
        $article->status = $input['status'] ?? 'draft';
        $article->authorId = $authorId;
        $article->slug = $this->slugs->unique($input['title'], fn (string $s) => $this->articles->slugExists($s));
        $article->tags = array_values(array_unique(array_map('strtolower', $input['tags'] ?? [])));

        try {
            $this->articles->save($article);
        } catch (\PDOException $e) {
            $this->logger->error('Could not save article', ['exception' => $e, 'author' => $authorId]);
            return ['status' => 500, 'errors' => ['database' => 'Please try again later.']];
        }

        $this->logger->info("Article {$article->slug} created by user #{$authorId}");
        return ['status' => 201, 'data' => $this->present($article)];
    }

    public function updateStatus(int $id, string $status): array
    {
        if (!in_array($status, self::ALLOWED_STATUSES, true)) {
            throw new InvalidArgumentException(sprintf('Unknown status "%s"', $status));
        }

        $article = $this->articles->find($id) ?? throw new NotFoundException("Article $id not found");

        $article->status = $status;
        $article->publishedAt = match ($status) {
            'published' => $article->publishedAt ?? new \DateTimeImmutable(),
            'draft', 'review' => null,
        };
        $this->articles->save($article);

        return ['status' => 200, 'data' => $this->present($article)];
    }

    /**
     * @return array<string, string>
     */
    private function validate(array $input): array
    {
        $errors = [];
        $title = trim($input['title'] ?? '');

        if ($title === '') {
            $errors['title'] = 'A title is required.';
        } elseif (mb_strlen($title) > 200) {
            $errors['title'] = 'The title may not be longer than 200 characters.';
        }

        if (empty($input['body'])) {
            $errors['body'] = 'The article body cannot be empty.';
        }

        foreach ($input['tags'] ?? [] as $i => $tag) {
            if (!preg_match('/^[a-z0-9-]{2,30}$/i', $tag)) {
                $errors["tags.$i"] = "Invalid tag: $tag";
            }
        }

        return $errors;
    }

    private function present(Article $article): array
    {
        $excerpt = strip_tags($article->body);
        if (mb_strlen($excerpt) > 160) {
            $excerpt = rtrim(mb_substr($excerpt, 0, 157)) . '...';
        }

        return [
            'id' => $article->id,
            'slug' => $article->slug,
            'title' => htmlspecialchars($article->title, ENT_QUOTES),
            'excerpt' => $excerpt,
            'tags' => $article->tags,
            'url' => <<<URL
                /blog/{$article->slug}
                URL,
            'published_at' => $article->publishedAt?->format(DATE_ATOM),
        ];
    }
}

interface ArticleRepository
{
    public function find(int $id): ?Article;

    public function save(Article $article): void;

    public function slugExists(string $slug): bool;

    public function paginate(string $status, ?string $tag, int $offset, int $limit): object;
}

final class NotFoundException extends \RuntimeException
{
    // Rendered as a 404 by the exception handler middleware.
}
?>
