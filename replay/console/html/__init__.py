"""How the console draws what :mod:`..model` read: the page shell (:mod:`.layout`), the
task list (:mod:`.list_page`), a task's page (:mod:`.task_page`, with the report's
timeline), the fleet's pages (:mod:`.fleet_pages`), the style sheet (:mod:`.assets`) and
the one script (:mod:`.script`). Every recorded value is escaped here."""
