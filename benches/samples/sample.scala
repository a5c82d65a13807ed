package example.billing

import scala.collection.immutable.SortedMap
import scala.util.{Failure, Success, Try}

/** Money amounts are kept in minor units (cents) to avoid rounding issues. */
final case class Money(cents: Long, currency: String = "EUR") {
  require(currency.length == 3, s"invalid currency code: $currency")

  def +(other: Money): Money = {
    require(other.currency == currency, "cannot add different currencies")
    copy(cents = cents + other.cents)
  }

  def *(factor: BigDecimal): Money =
    copy(cents = (BigDecimal(cents) * factor).setScale(0, BigDecimal.RoundingMode.HALF_EVEN).toLong)

  def /(divisor: Int): Money = copy(cents = cents / divisor)

  override def toString: String = f"${cents / 100}%d.${math.abs(cents % 100)}%02d $currency"
}

object Money {
  val Zero: Money = Money(0)

  /** Parses strings such as "12.50" or "12,50 EUR". */
  def parse(raw: String): Try[Money] = Try {
    val parts = raw.trim.split("\\s+")
    val amount = BigDecimal(parts(0).replace(',', '.'))
    val currency = if (parts.length > 1) parts(1).toUpperCase else "EUR"
    Money((amount * 100).toLongExact, currency)
  }
}

sealed trait LineItem {
  def description: String
  def total: Money
}

final case class Product(description: String, unitPrice: Money, quantity: Int) extends LineItem {
  def total: Money = unitPrice * BigDecimal(quantity)
}

final case class Discount(description: String, percent: Int, appliesTo: Money) extends LineItem {
  def total: Money = appliesTo * BigDecimal(-percent) / 100
}

final case class Shipping(method: String, cost: Money) extends LineItem {
  val description = s"Shipping ($method)"
  def total: Money = cost
}

/** An invoice groups line items and knows how to render itself. */
final case class Invoice(number: String, customer: String, items: Vector[LineItem] = Vector.empty) {

  def add(item: LineItem): Invoice = copy(items = items :+ item)

  lazy val subtotal: Money = items.collect { case p: Product => p.total }.foldLeft(Money.Zero)(_ + _)

  lazy val total: Money = items.map(_.total).foldLeft(Money.Zero)(_ + _)

  def taxes(rates: Map[String, BigDecimal]): SortedMap[String, Money] =
    SortedMap.from(rates.map { case (name, rate) => name -> (total * rate) })

  def render: String = {
    val header =
      s"""Invoice $number
         |Customer: $customer
         |""".stripMargin
    val lines = items.zipWithIndex.map { case (item, i) =>
      val kind = item match {
        case _: Product  => "P"
        case _: Discount => "D"
        case Shipping(_, _) => "S"
      }
      f"${i + 1}%3d [$kind] ${item.description}%-30s ${item.total.toString}%14s"
    }
    (header +: lines :+ s"${"-" * 52}\nTotal: $total").mkString("\n")
  }
}

object InvoiceApp {

  // Tax rates are usually loaded from configuration.
  private val DefaultRates = Map("VAT" -> BigDecimal("0.20"))

  def buildSample(): Either[String, Invoice] =
    for {
      price <- Money.parse("19.99").toEither.left.map(_.getMessage)
      ship <- Money.parse("4,90 EUR").toEither.left.map(e => s"bad shipping: ${e.getMessage}")
    } yield {
      val base = Invoice("INV-2024-0042", "ACME Ltd.")
        .add(Product("Widget", price, 3))
        .add(Product("Gadget", Money(1250), 1))
      base
        .add(Discount("Loyalty 10%", 10, base.subtotal))
        .add(Shipping("express", ship))
    }

  def main(args: Array[String]): Unit = {
    buildSample() match {
      case Right(invoice) =>
        println(invoice.render)
        invoice.taxes(DefaultRates).foreach { case (name, amount) => println(s"$name: $amount") }
      case Left(error) =>
        Console.err.println(s"could not build invoice: $error")
        sys.exit(1)
    }

    Money.parse(args.headOption.getOrElse("oops")) match {
      case Success(m) if m.cents > 0 => println(s"parsed $m")
      case Success(_)                => println("zero or negative amount")
      case Failure(e)                => println(s"parse failed: ${e.getClass.getSimpleName}")
    }
  }
}
