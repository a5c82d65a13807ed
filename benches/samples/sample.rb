# frozen_string_literal: true

require "json"
require "net/http"
require "openssl"
require "securerandom"
require "time"
require "logger"

module Webhooks
  # Raised when a payload signature does not match.
  class SignatureError < StandardError; end

  # Describes one outgoing webhook delivery and its retry state.
  class Delivery
    attr_reader :id, :url, :event, :payload, :attempts, :last_error

    MAX_ATTEMPTS = 5
    BACKOFF = [1, 5, 30, 120, 600].freeze

    def initialize(url:, event:, payload:, id: nil)
      @id = id || SecureRandom.hex(8)
      @url = url
      @event = event.to_s
      @payload = payload
      @attempts = 0
      @last_error = nil
    end

    def exhausted?
      attempts >= MAX_ATTEMPTS
    end

    def next_delay
      BACKOFF.fetch(attempts - 1) { BACKOFF.last }
    end

    def record_failure!(error)
      @attempts += 1
      @last_error = error.is_a?(Exception) ? "#{error.class}: #{error.message}" : error.to_s
    end

    def record_success!
      @attempts += 1
      @last_error = nil
    end

    def to_h
      { id: id, url: url, event: event, attempts: attempts, last_error: last_error }
    end
  end

  # Queues deliveries and sends them with exponential backoff.
  #
  #   dispatcher = Webhooks::Dispatcher.new(secret: ENV.fetch("WEBHOOK_SECRET"))
  #   dispatcher.enqueue("https://example.test/hook", :order_paid, { id: 42 })
  #   dispatcher.run_once
  class Dispatcher
    include Enumerable

    def initialize(secret:, http: nil, logger: Logger.new($stdout), clock: -> { Time.now })
      @secret = secret
      @http = http || method(:default_post)
      @logger = logger
      @clock = clock
      @queue = []
      @dead = []
    end

    def each(&block)
      @queue.each { |entry| block.call(entry[:delivery]) }
    end

    def enqueue(url, event, payload)
      raise ArgumentError, "url must be https" unless url.start_with?("https://")

      delivery = Delivery.new(url: url, event: event, payload: payload)
      @queue << { delivery: delivery, due_at: @clock.call }
      delivery
    end

    def sign(body)
      digest = OpenSSL::HMAC.hexdigest("SHA256", @secret, body)
      "sha256=#{digest}"
    end

    def verify!(body, header)
      expected = sign(body)
      return true if OpenSSL.secure_compare(expected, header.to_s)

      raise SignatureError, 'signature mismatch'
    end

    def run_once
      now = @clock.call
      due, @queue = @queue.partition { |entry| entry[:due_at] <= now }
      due.each do |entry|
        delivery = entry[:delivery]
        begin
          deliver(delivery)
          delivery.record_success!
          @logger.info("delivered #{delivery.event} to #{delivery.url}")
        rescue StandardError => e
          delivery.record_failure!(e)
          if delivery.exhausted?
            @logger.error("giving up on #{delivery.id} after #{delivery.attempts} attempts")
            @dead << delivery
          else
            @queue << { delivery: delivery, due_at: now + delivery.next_delay }
          end
        end
      end
      due.size
    end

    def dead_letters
      @dead.map(&:to_h)
    end

    private

    def deliver(delivery)
      body = JSON.generate(event: delivery.event, data: delivery.payload, sent_at: @clock.call.iso8601)
      headers = {
        "Content-Type" => "application/json",
        "X-Signature" => sign(body),
        "X-Delivery" => delivery.id
      }
      status = @http.call(delivery.url, body, headers)
      case status
      when 200..299 then :ok
      when 410 then raise "endpoint gone"
      else raise format("unexpected status %<status>d", status: status)
      end
    end

    def default_post(url, body, headers)
      uri = URI(url)
      response = Net::HTTP.post(uri, body, headers)
      response.code.to_i
    end
  end
end

if $PROGRAM_NAME == __FILE__
  sent = []
  fake_http = ->(url, _body, _headers) { sent << url; url.include?("fail") ? 500 : 204 }
  dispatcher = Webhooks::Dispatcher.new(secret: "s3cr3t", http: fake_http)
  %w[https://a.test/ok https://b.test/fail].each { |u| dispatcher.enqueue(u, :ping, { hello: "world" }) }
  puts "processed #{dispatcher.run_once} deliveries; #{dispatcher.count} pending"
  puts sent.inspect
end
