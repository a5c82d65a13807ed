// event_bus.cpp - a small type-safe publish/subscribe bus.
//
// Handlers are stored per event type and invoked synchronously in the
// order they were registered.

#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace events {

/// Opaque handle returned by subscribe(); pass it to unsubscribe().
struct Subscription {
    std::type_index type;
    std::size_t id;
};

class EventBus {
public:
    EventBus() = default;
    EventBus(const EventBus&) = delete;
    EventBus& operator=(const EventBus&) = delete;

    /// Registers a handler for events of type E.
    template <typename E>
    Subscription subscribe(std::function<void(const E&)> handler) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto& slots = handlers_[std::type_index(typeid(E))];
        const std::size_t id = ++next_id_;
        slots.push_back(Slot{id, [h = std::move(handler)](const void* e) {
                                 h(*static_cast<const E*>(e));
                             }});
        return Subscription{std::type_index(typeid(E)), id};
    }

    bool unsubscribe(const Subscription& sub) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = handlers_.find(sub.type);
        if (it == handlers_.end()) {
            return false;
        }
        auto& slots = it->second;
        auto before = slots.size();
        slots.erase(std::remove_if(slots.begin(), slots.end(),
                                   [&](const Slot& s) { return s.id == sub.id; }),
                    slots.end());
        return slots.size() != before;
    }

    /// Delivers an event to every handler registered for its type.
    template <typename E>
    std::size_t publish(const E& event) const {
        std::vector<Slot> snapshot;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = handlers_.find(std::type_index(typeid(E)));
            if (it == handlers_.end()) {
                return 0;
            }
            snapshot = it->second;
        }
        for (const auto& slot : snapshot) {
            slot.call(&event);
        }
        return snapshot.size();
    }

    std::size_t handler_count() const noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        std::size_t n = 0;
        for (const auto& [type, slots] : handlers_) {
            n += slots.size();
        }
        return n;
    }

private:
    struct Slot {
        std::size_t id;
        std::function<void(const void*)> call;
    };

    mutable std::mutex mutex_;
    std::unordered_map<std::type_index, std::vector<Slot>> handlers_;
    std::size_t next_id_ = 0;
};

}  // namespace events

// ---------------------------------------------------------------------------
// Example domain events

struct UserCreated {
    int id;
    std::string name;
};

struct OrderPlaced {
    int order_id;
    int user_id;
    double amount;
};

class AuditLog {
public:
    explicit AuditLog(std::ostream& out) : out_(out) {}

    void attach(events::EventBus& bus) {
        subs_.push_back(bus.subscribe<UserCreated>(
            [this](const UserCreated& e) { write("user", "created #" + std::to_string(e.id) + " '" + e.name + "'"); }));
        subs_.push_back(bus.subscribe<OrderPlaced>([this](const OrderPlaced& e) {
            if (e.amount > 1000.0) {
                write("order", "large order " + std::to_string(e.order_id));
            }
        }));
    }

    void detach(events::EventBus& bus) {
        for (const auto& s : subs_) {
            bus.unsubscribe(s);
        }
        subs_.clear();
    }

private:
    void write(const std::string& category, const std::string& message) {
        out_ << '[' << category << "] " << message << '\n';
        ++lines_;
    }

    std::ostream& out_;
    std::vector<events::Subscription> subs_;
    int lines_ = 0;
};

template <typename T>
static void print_all(const std::vector<T>& items, const char* label = "item") {
    for (std::size_t i = 0; i < items.size(); ++i) {
        std::cout << label << ' ' << i << ": " << items[i] << std::endl;
    }
}

int run_demo() {
    events::EventBus bus;
    AuditLog audit(std::cerr);
    audit.attach(bus);

    std::vector<std::string> names;
    auto sub = bus.subscribe<UserCreated>([&names](const UserCreated& e) { names.push_back(e.name); });

    bus.publish(UserCreated{1, "ada"});
    bus.publish(UserCreated{2, "grace"});
    bus.publish(OrderPlaced{100, 1, 1499.99});

    bus.unsubscribe(sub);
    bus.publish(UserCreated{3, R"(not "recorded")"});
    print_all(names, "name");

    audit.detach(bus);
    return bus.handler_count() == 0 ? 0 : 1;
}
