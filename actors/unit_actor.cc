#include "actors/unit_actor.h"

#include <utility>

#include "caf/system_messages.hpp"
#include "caf/exit_reason.hpp"

namespace ahbm::sim {

void UnitActor::Initialize() {
  AHBM_CHECK(!initialized()) << "unit actor " << id() << " initialized twice";
  if (initial_behavior_fac_) {
    auto behavior_function = std::move(initial_behavior_fac_);
    initial_behavior_fac_ = nullptr;
    behavior_function(this);  // calls Handlers(); the returned (empty) behavior is dropped
  }
  setf(is_initialized_flag);
}

void UnitActor::launch(caf::execution_unit*, bool, bool hide) {
  // Counted by the actor system while alive (local_actor::cleanup takes it off); initialized by
  // the engine, not scheduled: a unit has no mailbox.
  if (!hide) register_at_system();
}

void UnitActor::enqueue(caf::mailbox_element_ptr what, caf::execution_unit* host) {
  AHBM_CHECK(what != nullptr) << "unit actor " << id() << ": null message";
  const caf::type_erased_tuple& content = what->content();
  if (content.match_elements<caf::exit_msg>()) {
    const auto& exit = content.get_as<caf::exit_msg>(0);
    if (exit.reason == caf::exit_reason::normal) return;  // CAF: a normal exit is ignored
    Terminate(exit.reason, host);
    return;
  }
  AHBM_CHECK(false) << "unit actor " << id() << " (" << name()
                    << ") got a message from outside the engine: " << content.stringify()
                    << " (units talk only through Engine::Send)";
}

void UnitActor::Terminate(caf::error reason, caf::execution_unit* host) {
  if (getf(is_cleaned_up_flag)) return;
  // As local_actor::on_destroy does for an actor that becomes unreachable: the state goes
  // (on_exit), then CAF's cleanup, which marks the actor cleaned up.
  on_exit();
  cleanup(std::move(reason), host);
}

}  // namespace ahbm::sim
