using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Inventory.Services
{
    /// <summary>
    /// Represents a product tracked by the warehouse.
    /// </summary>
    public record Product(string Sku, string Name, decimal Price, int Stock)
    {
        public bool IsLowStock => Stock < 10;
    }

    public enum AdjustmentReason
    {
        Sale,
        Return,
        Damaged,
        Restock,
    }

    public interface IProductRepository
    {
        Task<Product?> FindAsync(string sku, CancellationToken ct = default);
        Task SaveAsync(Product product, CancellationToken ct = default);
        IAsyncEnumerable<Product> AllAsync(CancellationToken ct = default);
    }

    public class InsufficientStockException : Exception
    {
        public InsufficientStockException(string sku, int requested, int available)
            : base($"Cannot remove {requested} of {sku}; only {available} available.")
        {
            Sku = sku;
        }

        public string Sku { get; }
    }

    /// <summary>
    /// Applies stock adjustments and produces reports.
    /// </summary>
    public sealed class InventoryService
    {
        private readonly IProductRepository _repository;
        private readonly List<string> _auditTrail = new();
        private static readonly object Gate = new object();

        public InventoryService(IProductRepository repository)
        {
            _repository = repository ?? throw new ArgumentNullException(nameof(repository));
        }

        public IReadOnlyList<string> AuditTrail => _auditTrail.AsReadOnly();

        /// <summary>Changes the stock level of a product.</summary>
        /// <param name="sku">Product identifier.</param>
        /// <param name="delta">Positive to add stock, negative to remove it.</param>
        /// <param name="reason">Why the adjustment happened.</param>
        public async Task<Product> AdjustAsync(string sku, int delta, AdjustmentReason reason, CancellationToken ct = default)
        {
            var product = await _repository.FindAsync(sku, ct).ConfigureAwait(false)
                ?? throw new KeyNotFoundException($"Unknown SKU '{sku}'");

            if (delta < 0 && product.Stock + delta < 0)
            {
                throw new InsufficientStockException(sku, -delta, product.Stock);
            }

            var updated = product with { Stock = product.Stock + delta };
            await _repository.SaveAsync(updated, ct);

            lock (Gate)
            {
                _auditTrail.Add($"{DateTime.UtcNow:O} {reason,-8} {sku} {delta:+#;-#;0}");
            }
            return updated;
        }

        public async Task<string> BuildReportAsync(CancellationToken ct = default)
        {
            var products = new List<Product>();
            await foreach (var p in _repository.AllAsync(ct))
            {
                products.Add(p);
            }

            var sb = new StringBuilder();
            sb.AppendLine("SKU        Name                     Stock      Value");
            sb.AppendLine(new string('-', 56));

            foreach (var p in products.OrderBy(p => p.Sku, StringComparer.Ordinal))
            {
                var marker = p.IsLowStock ? "!" : " ";
                sb.AppendLine($"{p.Sku,-10} {p.Name,-24} {p.Stock,5}{marker} {p.Price * p.Stock,10:C}");
            }

            var total = products.Sum(p => p.Price * p.Stock);
            sb.AppendFormat("{0,-41}{1,15:C}", "Total", total).AppendLine();
            return sb.ToString();
        }

        public static string Describe(Product product) => product switch
        {
            { Stock: 0 } => $"{product.Name} is out of stock",
            { IsLowStock: true } => $"{product.Name} is running low ({product.Stock} left)",
            _ => @"In stock; see ""Inventory"" tab for details",
        };
    }

    // Simple in-memory implementation used in tests and demos.
    public class InMemoryProductRepository : IProductRepository
    {
        private readonly Dictionary<string, Product> _items = new(StringComparer.OrdinalIgnoreCase);

        public Task<Product?> FindAsync(string sku, CancellationToken ct = default)
        {
            _items.TryGetValue(sku, out var product);
            return Task.FromResult(product);
        }

        public Task SaveAsync(Product product, CancellationToken ct = default)
        {
            _items[product.Sku] = product;
            return Task.CompletedTask;
        }

        public async IAsyncEnumerable<Product> AllAsync([System.Runtime.CompilerServices.EnumeratorCancellation] CancellationToken ct = default)
        {
            foreach (var item in _items.Values.ToArray())
            {
                ct.ThrowIfCancellationRequested();
                yield return item;
                await Task.Yield();
            }
        }
    }
}
